// Package knowledge is what a character knows from documents: the files a
// user uploads to a character (its project knowledge) and the files
// attached to one conversation. It extracts their text, counts it, keeps
// small knowledge bases whole and chunks, indexes and retrieves from large
// ones, through one of several stores.
package knowledge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Text is what extraction makes of a file.
type Text struct {
	// Body is the file's text, in reading order, with paragraphs separated
	// by blank lines. Markdown keeps its "#" headings; HTML headings
	// become "#" lines so that the chunker can cut at them.
	Body string
	// Pages holds the byte offset in Body where each page starts (a PDF);
	// nil for files without pages. Pages[0] == 0.
	Pages []int
	// Format is the kind the file was read as: "text", "markdown", "html",
	// "pdf", "json" or "code".
	Format string
	// Title is the document's own title when it has one (an HTML <title>,
	// a Markdown file's first "# " heading, a PDF's Info Title), else "".
	Title string
}

// PageAt is the 1-based page holding byte offset off of Body (0: no pages).
func (t Text) PageAt(off int) int {
	page := 0
	for i, start := range t.Pages {
		if start > off {
			break
		}
		page = i + 1
	}
	return page
}

// Piece is one chunk of a document as the chunker cuts it.
type Piece struct {
	Text    string
	Heading string // the nearest heading above it ("" = none)
	Page    int    // the page it starts on (0: no pages)
	Tokens  int
}

// Chunk is a piece of a stored document, as the stores keep it.
type Chunk struct {
	DocID   string
	Seq     int    // its place in the document, from 0
	Name    string // the document's file name
	Title   string // the document's title, or its file name
	Heading string
	Page    int
	Text    string
	Tokens  int
	// Vector is the chunk's embedding (nil: none).
	Vector []float32
}

// SearchQuery is one retrieval.
type SearchQuery struct {
	Text string
	// Vector is the query's embedding (nil: rank by keywords only).
	Vector []float32
	// Limit is the most hits wanted.
	Limit int
}

// Hit is one chunk found, best first.
type Hit struct {
	Chunk
	// Score orders hits within one search (higher is better); its scale
	// is the store's own.
	Score float64
	// KeywordBest marks the hit that ranks first by keywords alone, when
	// the store tells (the memory and local stores do): the auto router
	// judges by it whatever vectors did to the order.
	KeywordBest bool
}

// Index is where a store keeps chunks and searches them. Every method is
// safe for concurrent use. conf is a character's conf_uid; knowledge bases
// of different characters never mix.
type Index interface {
	// Put replaces every chunk of document docID with chunks (an empty
	// list removes them). It is all or nothing.
	Put(ctx context.Context, conf, docID string, chunks []Chunk) error
	// Delete removes every chunk of document docID (none: no error).
	Delete(ctx context.Context, conf, docID string) error
	// Search returns up to q.Limit chunks of conf's documents, best first:
	// keywords always, fused with vector similarity when q.Vector is set
	// and the store keeps vectors.
	Search(ctx context.Context, conf string, q SearchQuery) ([]Hit, error)
	// Len is how many chunks conf has.
	Len(ctx context.Context, conf string) (int, error)
	// Vectors reports whether the store ranks by vectors at all.
	Vectors() bool
	Close() error
}

// Document is one file of a character's knowledge base, as listed.
type Document struct {
	ID     string    `json:"id"`
	Name   string    `json:"name"`
	Mime   string    `json:"mime"`
	Format string    `json:"format"`
	Title  string    `json:"title"`
	Bytes  int       `json:"bytes"`
	Tokens int       `json:"tokens"`
	Pages  int       `json:"pages,omitempty"`
	Chunks int       `json:"chunks"`
	Added  time.Time `json:"added"`
}

// FileError is why a file was refused. Its message is for the user.
type FileError struct {
	Filename string `json:"filename"`
	Reason   string `json:"reason"`
	// Kind sorts the refusals; it is what callers and tests tell apart.
	Kind FileErrorKind `json:"kind"`
}

func (e *FileError) Error() string { return fmt.Sprintf("%s: %s", e.Filename, e.Reason) }

// FileErrorKind sorts refusals.
type FileErrorKind string

// The ways a file is refused.
const (
	ErrKindEmpty     FileErrorKind = "empty"     // no bytes, or no text in them
	ErrKindType      FileErrorKind = "type"      // not a format koe reads
	ErrKindCorrupt   FileErrorKind = "corrupt"   // a PDF (or JSON, or HTML) that does not parse, text that is not UTF-8
	ErrKindTooLarge  FileErrorKind = "too_large" // over knowledge.max_file_bytes
	ErrKindTooLong   FileErrorKind = "too_long"  // more tokens than the context can hold, or knowledge.max_document_tokens
	ErrKindTooMany   FileErrorKind = "too_many"  // over knowledge.max_documents
	ErrKindEncrypted FileErrorKind = "encrypted" // a password-protected PDF
	ErrKindName      FileErrorKind = "name"      // no usable file name
	ErrKindBusy      FileErrorKind = "busy"      // the same file is being read already
	ErrKindInflated  FileErrorKind = "inflated"  // inflates past knowledge.max_inflated_bytes as it is read
	ErrKindTimeout   FileErrorKind = "timeout"   // reading it took longer than knowledge.ingest_timeout
	// ErrKindOverloaded: knowledge.max_concurrent_ingests files are being
	// read already; the same file may be sent again in a few seconds.
	ErrKindOverloaded FileErrorKind = "overloaded"
)

// IsFileError reports whether err is a refusal of the file (as opposed to
// koe failing to store or index it).
func IsFileError(err error) bool {
	var fe *FileError
	return errors.As(err, &fe)
}
