package historytest

import (
	"encoding/base64"
	"fmt"
	"sync"
	"testing"
	"time"

	"koe"
	"koe/history"
)

// Fixtures of the suite, for a backend's own tests too. The Must helpers
// fail the test on an error.

// StepClock returns a clock that starts at start and advances by one second
// on every call, so each id and timestamp is distinct and predictable.
func StepClock(start time.Time) func() time.Time {
	var mu sync.Mutex
	next := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := next
		next = next.Add(time.Second)
		return t
	}
}

// T0 is where the tests' clocks start.
var T0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.Local)

// MustCreate creates an empty history of conf and returns its uid.
func MustCreate(t testing.TB, s history.Records, conf string) string {
	t.Helper()
	uid, err := s.Create(t.Context(), conf)
	if err != nil {
		t.Fatalf("Create(%q): %v", conf, err)
	}
	return uid
}

// MustCreateWith creates history uid of conf with records.
func MustCreateWith(t testing.TB, s history.Records, conf, uid string, records ...koe.Record) {
	t.Helper()
	if err := s.CreateWith(t.Context(), conf, uid, records...); err != nil {
		t.Fatalf("CreateWith(%q, %q): %v", conf, uid, err)
	}
}

// MustAppend appends r to a history.
func MustAppend(t testing.TB, s history.Records, conf, uid string, r koe.Record) {
	t.Helper()
	if err := s.Append(t.Context(), conf, uid, r); err != nil {
		t.Fatalf("Append(%q, %q): %v", conf, uid, err)
	}
}

// Summary returns a valid record of n turns of history uid starting at first.
func Summary(uid string, first, n int, text string) koe.SummaryRecord {
	turns := make([]int, n)
	for i := range turns {
		turns[i] = first + i
	}
	return koe.SummaryRecord{
		ThreadID:        uid,
		Turns:           turns,
		TurnLength:      n,
		OriginalChars:   1000,
		SummaryChars:    300,
		CompressionRate: 0.3,
		Summary:         text,
	}
}

// MustAddSummary stores r as a summary of a history.
func MustAddSummary(t testing.TB, s history.Summaries, conf, uid string, r koe.SummaryRecord) {
	t.Helper()
	if err := s.AddSummary(t.Context(), conf, uid, r); err != nil {
		t.Fatalf("AddSummary(%q, %q, turns %v): %v", conf, uid, r.Turns, err)
	}
}

// MustSummaries reads a history's summaries.
func MustSummaries(t testing.TB, s history.Summaries, conf, uid string) []koe.SummaryRecord {
	t.Helper()
	got, err := s.Summaries(t.Context(), conf, uid)
	if err != nil {
		t.Fatalf("Summaries(%q, %q): %v", conf, uid, err)
	}
	return got
}

// Picture returns n distinct bytes, so a mix-up between images shows.
func Picture(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// Base64 is b as an image's Data carries it.
func Base64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// MustImage reads an image of a history by its ref.
func MustImage(t testing.TB, s history.Records, conf, uid, ref string) (string, []byte) {
	t.Helper()
	mime, data, err := s.Image(t.Context(), conf, uid, ref)
	if err != nil {
		t.Fatalf("Image(%q): %v", ref, err)
	}
	return mime, data
}

// RecallOf reads every recall entry of conf.
func RecallOf(t testing.TB, s history.Recall, conf string) []koe.RecallEntry {
	t.Helper()
	var out []koe.RecallEntry
	if err := s.ForEachRecall(t.Context(), conf, func(e koe.RecallEntry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("ForEachRecall(%q): %v", conf, err)
	}
	return out
}

// MustSaveRecall saves entries and moves the mark from wherever it is.
func MustSaveRecall(t testing.TB, s history.Recall, conf, uid string, mark koe.RecallMark, es ...koe.RecallEntry) []koe.RecallEntry {
	t.Helper()
	ctx := t.Context()
	from, _, err := s.RecallMark(ctx, conf, uid)
	if err != nil {
		t.Fatalf("RecallMark(%q, %q): %v", conf, uid, err)
	}
	saved, err := s.SaveRecall(ctx, conf, uid, from, mark, es)
	if err != nil {
		t.Fatalf("SaveRecall(%q, %q): %v", conf, uid, err)
	}
	return saved
}

// Entry is a recall entry of history uid at seq (and turn seq).
func Entry(uid string, seq uint64, text string) koe.RecallEntry {
	return koe.RecallEntry{HistoryUID: uid, Seq: seq, Turn: int(seq), Role: koe.RoleHuman, Timestamp: "2025-03-04T05:06:07", Text: text}
}

// KnowledgeDoc is a document's listing entry, added at added.
func KnowledgeDoc(id string, added time.Time) koe.KnowledgeDoc {
	return koe.KnowledgeDoc{ID: id, Name: id + ".pdf", Mime: "application/pdf", Format: "pdf", Title: "Manual " + id,
		Bytes: 1234, Tokens: 300, Pages: 2, Chunks: 2, Added: added}
}

// KnowledgeChunks are n chunks of document docID, with vectors of dim
// dimensions (0: none).
func KnowledgeChunks(docID string, n int, dim int) []koe.KnowledgeChunk {
	out := make([]koe.KnowledgeChunk, n)
	for i := range out {
		out[i] = koe.KnowledgeChunk{DocID: docID, Seq: i, Name: docID + ".pdf", Title: "Manual", Heading: fmt.Sprintf("Section %d", i),
			Page: i + 1, Tokens: 10 + i, Text: fmt.Sprintf("chunk %d of %s", i, docID)}
		if dim > 0 {
			out[i].Vector = make([]float32, dim)
			for j := range out[i].Vector {
				out[i].Vector[j] = float32(i) + float32(j)/10
			}
		}
	}
	return out
}

// ChunksOf reads every knowledge chunk of conf.
func ChunksOf(t testing.TB, s history.Chunks, conf string) []koe.KnowledgeChunk {
	t.Helper()
	var out []koe.KnowledgeChunk
	if err := s.ForEachKnowledgeChunk(t.Context(), conf, func(c koe.KnowledgeChunk) error {
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatalf("ForEachKnowledgeChunk(%q): %v", conf, err)
	}
	return out
}
