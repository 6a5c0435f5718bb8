// Package bpe counts tokens the way tiktoken encodes text, for OpenAI's
// vocabularies, from a rank table that holds no pointers.
//
// tiktoken-go keeps a vocabulary as map[string]int and its reverse, and
// keeps them for the life of the process: for o200k_base about 200,000
// strings, tens of megabytes that every garbage collection scans. A Table
// is one byte arena with every token's bytes and flat integer arrays (the
// offsets, an open-addressing index), a few megabytes the collector never
// looks into. The vocabularies come from tiktoken-go-loader's embedded
// files, read a line at a time: nothing is fetched at run time.
//
// An Encoding splits text into pieces exactly as the encoding's regular
// expression does in tiktoken-go (hand-written splitters, see split.go),
// and merges each piece's bytes exactly as tiktoken's byte-pair merge
// does (merge.go), so every count equals tiktoken-go's EncodeOrdinary:
// the tests compare them over corpora and a fuzz target. Special-token
// strings such as "<|endoftext|>" are ordinary text here, as they are to
// EncodeOrdinary.
package bpe

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// Encoding counts tokens for one vocabulary. It is safe for concurrent
// use and never changes once built.
type Encoding struct {
	name  string
	table *Table
	split splitter
}

// encodings lists the encodings this package builds: the file of ranks
// in tiktoken-go-loader and the split pattern (p50k_edit differs from
// p50k_base only in special tokens, which counting treats as text).
var encodings = map[string]struct {
	file  string
	split splitter
}{
	"o200k_base":  {"o200k_base.tiktoken", splitO200k},
	"cl100k_base": {"cl100k_base.tiktoken", splitCL100k},
	"p50k_base":   {"p50k_base.tiktoken", splitGPT2},
	"p50k_edit":   {"p50k_base.tiktoken", splitGPT2},
	"r50k_base":   {"r50k_base.tiktoken", splitGPT2},
}

// Known reports whether Load can build the encoding called name.
func Known(name string) bool {
	_, ok := encodings[name]
	return ok
}

// Load builds the encoding called name (o200k_base, cl100k_base,
// p50k_base, p50k_edit or r50k_base) from the embedded vocabulary. Each
// call builds a new one: o200k_base takes 25–50 ms and keeps 4 MiB of
// heap (and the 4 MiB of the binary's pages it was read from, until the
// kernel drops them); callers share what they build.
func Load(name string) (*Encoding, error) {
	e, ok := encodings[name]
	if !ok {
		return nil, fmt.Errorf("bpe: unknown encoding %q", name)
	}
	t, err := ReadTable(assets.Assets, e.file)
	if err != nil {
		return nil, fmt.Errorf("bpe: building %s: %w", name, err)
	}
	return &Encoding{name: name, table: t, split: e.split}, nil
}

// Name returns the encoding's name, e.g. "o200k_base".
func (e *Encoding) Name() string { return e.name }

// Table returns the encoding's rank table.
func (e *Encoding) Table() *Table { return e.table }

// Count returns the number of tokens text encodes to. Bytes that are not
// UTF-8 count as U+FFFD each, as tiktoken-go reads text as runes.
func (e *Encoding) Count(text string) int {
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	n := 0
	for i := 0; i < len(text); {
		j := e.next(text, i)
		n += e.table.countPiece(text[i:j])
		i = j
	}
	return n
}

// next returns the end of the piece at text[i]. Every character starts a
// piece of each pattern, so the splitter always moves on; were it ever not
// to, a character is its own piece rather than a loop without end.
func (e *Encoding) next(text string, i int) int {
	if j := e.split(text, i); j > i {
		return j
	}
	_, n := utf8.DecodeRuneInString(text[i:])
	return i + n
}

// Pieces returns text cut as the encoding's split pattern cuts it (after
// the same replacement of bytes that are not UTF-8 as Count).
func (e *Encoding) Pieces(text string) []string {
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	var pieces []string
	for i := 0; i < len(text); {
		j := e.next(text, i)
		pieces = append(pieces, text[i:j])
		i = j
	}
	return pieces
}

// replaceInvalid replaces each byte of s that does not begin a valid UTF-8
// character with U+FFFD, one for each such byte, as converting s to
// []rune does (strings.ToValidUTF8 would replace a run of them with one).
func replaceInvalid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/2)
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}
