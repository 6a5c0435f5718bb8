package history

import (
	"context"
	"time"

	"koe"
)

// What a store offers, whatever its database. Every method takes the
// caller's context first: an ended one fails the call before it changes
// anything. ids are checked (CheckConf and its siblings) before the
// database is touched. A history is known by its character's conf uid and
// its own uid; consumers declare the few methods they need.

// Store is everything a backend keeps.
type Store interface {
	Records
	Summaries
	Prompts
	Recall
	Documents
	Chunks
	Close() error
}

// Records keeps histories: each starts with a metadata record, and its
// records are numbered from 1 in the order stored (Record.Seq).
type Records interface {
	// Create starts a new, empty history (just its metadata record) and
	// returns its uid.
	Create(ctx context.Context, conf string) (string, error)
	// CreateWith creates history uid (see koe.NewHistoryUID) with its
	// metadata record and then records, all at once. It fails if uid
	// exists.
	CreateWith(ctx context.Context, conf, uid string, records ...koe.Record) error
	// Append adds r to the end of an existing history. It never creates
	// the history: ErrNotFound.
	Append(ctx context.Context, conf, uid string, r koe.Record) error
	// Messages returns every record of a history in order, metadata
	// included. Images come with refs, not bytes (see Image).
	Messages(ctx context.Context, conf, uid string) ([]koe.Record, error)
	// Since returns up to limit records stored after sequence after,
	// oldest first, metadata included (Seq tells where to go on).
	Since(ctx context.Context, conf, uid string, after uint64, limit int) ([]koe.Record, error)
	// Page returns up to limit records older than sequence before (0: the
	// newest), oldest first, and whether older ones remain. Metadata
	// records are skipped and do not count. To walk back, pass the Seq of
	// a page's first record as the next before.
	Page(ctx context.Context, conf, uid string, before uint64, limit int) (records []koe.Record, more bool, err error)
	// LastSeq is the sequence number of the history's newest record: it
	// changes with every record stored.
	LastSeq(ctx context.Context, conf, uid string) (uint64, error)
	// Image returns the type and bytes of an image by its ref (an
	// Image.Ref from a read). An unknown ref is ErrNotFound, a malformed
	// one ErrInvalidID.
	Image(ctx context.Context, conf, uid, ref string) (mime string, data []byte, err error)
	// List summarises a character's histories, most recently active
	// first; those holding only their metadata record are left out.
	List(ctx context.Context, conf string) ([]koe.ListedHistory, error)
	Exists(ctx context.Context, conf, uid string) (bool, error)
	// Delete removes a history with everything kept of it: records,
	// images, summaries and its recall entries.
	Delete(ctx context.Context, conf, uid string) error
	// Confs lists the conf uids that have histories.
	Confs(ctx context.Context) ([]string, error)
}

// Summaries keeps the memory summaries of histories.
type Summaries interface {
	// AddSummary stores r as a summary of a history, replacing one that
	// starts at the same turn. The history must exist.
	AddSummary(ctx context.Context, conf, uid string, r koe.SummaryRecord) error
	// Summaries returns a history's summaries by first turn (none: empty).
	Summaries(ctx context.Context, conf, uid string) ([]koe.SummaryRecord, error)
}

// Prompts keeps the prompts users edit, per character.
type Prompts interface {
	// SetPrompt stores a prompt; an empty text deletes it.
	SetPrompt(ctx context.Context, conf, name, text string) error
	// Prompt returns a prompt; ok is false when none is stored.
	Prompt(ctx context.Context, conf, name string) (text string, ok bool, err error)
}

// Recall keeps each character's long-term memory (package recall): an
// entry per remembered message, with its embedding, how far each history
// is indexed, and the entries forgotten for good.
type Recall interface {
	// RecallMark returns how far a history is indexed (ok false: not).
	RecallMark(ctx context.Context, conf, uid string) (mark koe.RecallMark, ok bool, err error)
	// RecallMarks returns the mark of every indexed history of a conf.
	RecallMarks(ctx context.Context, conf string) (map[string]koe.RecallMark, error)
	// SaveRecall stores entries of a history and moves its mark from
	// from to mark, all or nothing, and returns the entries stored (those
	// forgotten before are skipped). The mark moves only if it still is
	// from (ErrMarkMoved otherwise, and nothing is written), so that two
	// indexers never store one history's entries twice nor move its mark
	// back. A history that no longer exists gets nothing (ErrNotFound).
	SaveRecall(ctx context.Context, conf, uid string, from, mark koe.RecallMark, entries []koe.RecallEntry) ([]koe.RecallEntry, error)
	// SetRecallVectors stores the embeddings of entries already saved,
	// made with model; entries gone since are skipped. Vectors of another
	// model are dropped first: they could not be compared with these.
	SetRecallVectors(ctx context.Context, conf, model string, entries []koe.RecallEntry) error
	// RecallVectorModel is the model that made a conf's vectors ("": none).
	RecallVectorModel(ctx context.Context, conf string) (string, error)
	// ForEachRecall calls fn with every entry of a conf, with its vector,
	// by history uid (byte order) and sequence. fn must not call the store.
	ForEachRecall(ctx context.Context, conf string, fn func(koe.RecallEntry) error) error
	// RecallSince returns up to limit entries of a history after sequence
	// after, in order, with their vectors (ErrNotFound: no such history).
	RecallSince(ctx context.Context, conf, uid string, after uint64, limit int) ([]koe.RecallEntry, error)
	// ForgetRecall forgets one entry for good: it stays forgotten through
	// rebuilds. It reports whether the entry existed.
	ForgetRecall(ctx context.Context, conf, uid string, seq uint64) (bool, error)
	// ForgetRecalls forgets many entries of one history at once and
	// reports how many existed.
	ForgetRecalls(ctx context.Context, conf, uid string, seqs []uint64) (int, error)
	// ForgottenRecalls returns the forgotten entries' sequence numbers by
	// history uid, of one history (uid "": of every history of the conf).
	ForgottenRecalls(ctx context.Context, conf, uid string) (map[string][]uint64, error)
	// FillRecallVectors gives each of entries without a vector the one
	// stored for it, if the conf's vectors are model's, and reports how
	// many it gave.
	FillRecallVectors(ctx context.Context, conf, model string, entries []koe.RecallEntry) (int, error)
	// ClearRecall drops a conf's entries, vectors and marks so that its
	// index is built again. What was forgotten stays forgotten.
	ClearRecall(ctx context.Context, conf string) error
}

// Documents keeps each character's knowledge documents (package
// knowledge), apart from their histories.
type Documents interface {
	// PutKnowledgeDoc creates or replaces (by d.ID) a document and its
	// text; pages are the byte offsets in text where each page starts
	// (nil: none).
	PutKnowledgeDoc(ctx context.Context, conf string, d koe.KnowledgeDoc, text string, pages []int) error
	// KnowledgeDocs lists a conf's documents, oldest first.
	KnowledgeDocs(ctx context.Context, conf string) ([]koe.KnowledgeDoc, error)
	// KnowledgeText returns a document's text and page offsets.
	KnowledgeText(ctx context.Context, conf, id string) (text string, pages []int, err error)
	// DeleteKnowledgeDoc removes a document, its text and its chunks and
	// reports whether there was anything to remove.
	DeleteKnowledgeDoc(ctx context.Context, conf, id string) (bool, error)
	// KnowledgeConfs lists the confs that have documents or chunks.
	KnowledgeConfs(ctx context.Context) ([]string, error)
}

// Chunks keeps the chunks of knowledge documents with their embeddings,
// for knowledge's local index.
type Chunks interface {
	// PutKnowledgeChunks replaces every chunk of a document, all or
	// nothing. A chunk's DocID must be docID or empty; seqs must be
	// distinct and fit in 32 bits (ErrInvalidRecord).
	PutKnowledgeChunks(ctx context.Context, conf, docID string, chunks []koe.KnowledgeChunk) error
	// DeleteKnowledgeChunks removes every chunk of a document.
	DeleteKnowledgeChunks(ctx context.Context, conf, docID string) error
	// ForEachKnowledgeChunk calls fn with every chunk of a conf, with its
	// vector, by document id (byte order) and sequence. fn must not call
	// the store.
	ForEachKnowledgeChunk(ctx context.Context, conf string, fn func(koe.KnowledgeChunk) error) error
}

// DefaultTimeout bounds one call to a store that waits on a server
// (store_timeout's default).
const DefaultTimeout = 10 * time.Second
