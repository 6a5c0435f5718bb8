package koe

import (
	"fmt"
	"time"
)

// KnowledgeDoc is one document of a character's knowledge base, without its text.
type KnowledgeDoc struct {
	ID     string    `json:"-"`
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

// CheckPages checks the page offsets of a document's text: the byte
// offsets in text where each page starts, in order (nil: no pages).
func CheckPages(text string, pages []int) error {
	for i, p := range pages {
		if p < 0 || p > len(text) || (i > 0 && p < pages[i-1]) {
			return fmt.Errorf("page %d starts at %d, outside the text or before the page above: %w", i+1, p, ErrInvalidRecord)
		}
	}
	return nil
}

// KnowledgeChunk is a stored chunk (the local knowledge store keeps them
// with their vectors). Its fields are knowledge.Chunk's, in the same
// order, so the knowledge package converts one to the other without
// copying fields.
type KnowledgeChunk struct {
	DocID   string `json:"-"`
	Seq     int    `json:"-"`
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Heading string `json:"heading,omitempty"`
	Page    int    `json:"page,omitempty"`
	Text    string `json:"text"`
	Tokens  int    `json:"tokens"`
	// Vector is stored apart from the chunk, compactly.
	Vector []float32 `json:"-"`
}
