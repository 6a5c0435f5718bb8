package migratecmd

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"koe"
	"koe/bolt"
	"koe/history"
	"koe/postgres"
	"koe/testkit/pgtest"
)

// reader is what the comparison reads of either store.
type reader interface {
	List(ctx context.Context, conf string) ([]koe.ListedHistory, error)
	Exists(ctx context.Context, conf, uid string) (bool, error)
	Messages(ctx context.Context, conf, uid string) ([]koe.Record, error)
	LastSeq(ctx context.Context, conf, uid string) (uint64, error)
	Page(ctx context.Context, conf, uid string, before uint64, limit int) ([]koe.Record, bool, error)
	Image(ctx context.Context, conf, uid, ref string) (string, []byte, error)
	Summaries(ctx context.Context, conf, uid string) ([]koe.SummaryRecord, error)
	Prompt(ctx context.Context, conf, name string) (string, bool, error)
	ForEachRecall(ctx context.Context, conf string, fn func(koe.RecallEntry) error) error
	RecallMarks(ctx context.Context, conf string) (map[string]koe.RecallMark, error)
	RecallVectorModel(ctx context.Context, conf string) (string, error)
	KnowledgeDocs(ctx context.Context, conf string) ([]koe.KnowledgeDoc, error)
	KnowledgeText(ctx context.Context, conf, id string) (string, []int, error)
	ForEachKnowledgeChunk(ctx context.Context, conf string, fn func(koe.KnowledgeChunk) error) error
}

// fixture is what the varied bbolt store holds, by conf.
type fixture struct {
	histories map[string][]string // conf -> uids
	confs     []string            // every conf with anything
}

func img(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// buildBolt fills a bbolt store through its public API: several
// characters, histories with images, tool steps, summaries, prompts,
// recall entries with vectors, a forgotten entry, and a knowledge
// document with chunks.
func buildBolt(t *testing.T, path string) fixture {
	t.Helper()
	ctx := t.Context()
	clock := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := bolt.Open(path, bolt.Options{Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f := fixture{histories: map[string][]string{}, confs: []string{"alice", "bob", "docs_only"}}
	png := []byte("\x89PNG\r\n\x1a\nfake picture bytes \x00\x01\x02")
	jpg := bytes.Repeat([]byte{0xff, 0xd8, 0x42}, 3000)
	// alice's vectors have a model (set first: a change of model drops
	// the vectors stored).
	must(s.SetRecallVectors(ctx, "alice", "embed-small", nil))
	for ci, conf := range []string{"alice", "bob"} {
		for h := range 3 + ci {
			uid, err := s.Create(ctx, conf)
			must(err)
			f.histories[conf] = append(f.histories[conf], uid)
			for turn := range 4 + h {
				r := koe.Record{Role: koe.RoleHuman, Content: fmt.Sprintf("%s question %d «ünïcode» \"quoted\" <tag>&", conf, turn), Name: "Human"}
				if turn == 1 {
					r.Images = []koe.Image{{Source: "upload", MimeType: "image/png", Data: img(png)}, {Source: "camera", MimeType: "image/jpeg", Data: "data:image/jpeg;base64," + img(jpg)}}
				}
				if turn == 2 {
					r.Meta = map[string]string{"dialog_id": fmt.Sprint(h, turn), "z": "last", "a": "first"}
				}
				must(s.Append(ctx, conf, uid, r))
				if turn == 2 {
					must(s.Append(ctx, conf, uid, koe.Record{Role: koe.RoleToolCall, Content: "let me look", ToolCalls: []koe.ToolCall{{ID: "call_1", Name: "search", Arguments: `{"q":"x"}`}}}))
					must(s.Append(ctx, conf, uid, koe.Record{Role: koe.RoleTool, Name: "search", ToolCallID: "call_1", Content: "found"}))
				}
				must(s.Append(ctx, conf, uid, koe.Record{Role: koe.RoleAI, Content: fmt.Sprintf("answer %d", turn), Name: conf, Avatar: conf + ".png", Interrupted: turn == 3}))
			}
			must(s.AddSummary(ctx, conf, uid, koe.SummaryRecord{ThreadID: uid, Turns: []int{1, 2}, TurnLength: 2, OriginalChars: 100, SummaryChars: 20, CompressionRate: 0.2, Summary: "they talked"}))
			if h == 0 {
				must(s.AddSummary(ctx, conf, uid, koe.SummaryRecord{ThreadID: uid, Turns: []int{3}, TurnLength: 1, OriginalChars: 50, SummaryChars: 10, CompressionRate: 0.2, Summary: "more talk"}))
			}
			msgs, err := s.Messages(ctx, conf, uid)
			must(err)
			var entries []koe.RecallEntry
			for _, m := range msgs {
				if m.Shown() {
					entries = append(entries, koe.RecallEntry{HistoryUID: uid, Seq: m.Seq, Turn: int(m.Seq), Role: m.Role, Timestamp: m.Timestamp, Text: m.Content,
						Vector: []float32{float32(m.Seq), -0.5, 1e-7, float32(h)}})
				}
			}
			if h == 1 {
				entries[len(entries)-1].Vector = nil // one entry without a vector
			}
			_, err = s.SaveRecall(ctx, conf, uid, koe.RecallMark{}, koe.RecallMark{Seq: msgs[len(msgs)-1].Seq, Turn: 5}, entries)
			must(err)
			if h == 0 {
				_, err := s.ForgetRecall(ctx, conf, uid, entries[0].Seq)
				must(err)
			}
		}
		must(s.SetPrompt(ctx, conf, koe.PromptSystem, "You are "+conf+".\nBe kind."))
	}
	// A history with nothing but its metadata record.
	empty, err := s.Create(ctx, "bob")
	must(err)
	f.histories["bob"] = append(f.histories["bob"], empty)
	must(s.SetPrompt(ctx, "bob", koe.PromptReminder, "remember"))
	must(s.SetPrompt(ctx, "docs_only", koe.PromptSystem, "a character with documents"))
	text := "Page one text.\fPage two text, longer."
	must(s.PutKnowledgeDoc(ctx, "docs_only", koe.KnowledgeDoc{ID: "d1", Name: "manual.pdf", Mime: "application/pdf", Format: "pdf", Title: "Manual", Bytes: 1234, Tokens: 12, Pages: 2, Chunks: 2, Added: clock}, text, []int{0, 15}))
	must(s.PutKnowledgeChunks(ctx, "docs_only", "d1", []koe.KnowledgeChunk{
		{Seq: 0, Name: "manual.pdf", Title: "Manual", Heading: "One", Page: 1, Text: "Page one text.", Tokens: 4, Vector: []float32{0.1, 0.2}},
		{Seq: 1, Name: "manual.pdf", Title: "Manual", Page: 2, Text: "Page two text, longer.", Tokens: 6, Vector: []float32{0.3, 0.4}},
	}))
	must(s.PutKnowledgeDoc(ctx, "alice", koe.KnowledgeDoc{ID: "notes", Name: "notes.txt", Mime: "text/plain", Format: "text", Bytes: 5, Tokens: 1, Added: clock}, "notes", nil))
	return f
}

// snapshot reads everything through r's public API into one value.
func snapshot(t *testing.T, r reader, f fixture) map[string]any {
	t.Helper()
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]any{}
	for _, conf := range f.confs {
		list, err := r.List(ctx, conf)
		must(err)
		out[conf+"/list"] = list
		for _, uid := range f.histories[conf] {
			ok, err := r.Exists(ctx, conf, uid)
			must(err)
			if !ok {
				t.Fatalf("history %s/%s is missing", conf, uid)
			}
			key := conf + "/" + uid
			msgs, err := r.Messages(ctx, conf, uid)
			must(err)
			out[key+"/messages"] = msgs
			last, err := r.LastSeq(ctx, conf, uid)
			must(err)
			out[key+"/last"] = last
			page, more, err := r.Page(ctx, conf, uid, 0, 3)
			must(err)
			out[key+"/page"] = []any{page, more}
			for _, m := range msgs {
				for _, im := range m.Images {
					mime, data, err := r.Image(ctx, conf, uid, im.Ref)
					must(err)
					out[key+"/image/"+im.Ref] = []any{mime, data}
				}
			}
			sums, err := r.Summaries(ctx, conf, uid)
			must(err)
			out[key+"/summaries"] = sums
		}
		for _, name := range []string{koe.PromptSystem, koe.PromptReminder} {
			text, ok, err := r.Prompt(ctx, conf, name)
			must(err)
			out[conf+"/prompt/"+name] = []any{text, ok}
		}
		var recall []koe.RecallEntry
		must(r.ForEachRecall(ctx, conf, func(e koe.RecallEntry) error { recall = append(recall, e); return nil }))
		sort.Slice(recall, func(i, j int) bool {
			if recall[i].HistoryUID != recall[j].HistoryUID {
				return recall[i].HistoryUID < recall[j].HistoryUID
			}
			return recall[i].Seq < recall[j].Seq
		})
		out[conf+"/recall"] = recall
		marks, err := r.RecallMarks(ctx, conf)
		must(err)
		out[conf+"/marks"] = marks
		model, err := r.RecallVectorModel(ctx, conf)
		must(err)
		out[conf+"/model"] = model
		docs, err := r.KnowledgeDocs(ctx, conf)
		must(err)
		for i := range docs {
			docs[i].Added = docs[i].Added.UTC()
			text, pages, err := r.KnowledgeText(ctx, conf, docs[i].ID)
			must(err)
			out[conf+"/doc/"+docs[i].ID] = []any{text, pages}
		}
		out[conf+"/docs"] = docs
		var chunks []koe.KnowledgeChunk
		must(r.ForEachKnowledgeChunk(ctx, conf, func(c koe.KnowledgeChunk) error { chunks = append(chunks, c); return nil }))
		out[conf+"/chunks"] = chunks
	}
	return out
}

func openPG(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawBodies is every record's stored JSON, by conf/uid/seq, read from the
// bbolt file's export and from PostgreSQL's table.
func rawBolt(t *testing.T, path string) map[string][]byte {
	t.Helper()
	ctx := t.Context()
	s, err := bolt.OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[string][]byte{}
	err = s.ExportHistories(ctx, func(h *history.HistoryExport) error {
		for _, r := range h.Records {
			out[fmt.Sprintf("%s/%s/%d", h.Conf, h.UID, r.Seq)] = bytes.Clone(r.Body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func rawPG(t *testing.T, dsn string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT conf_uid, uid, seq, body FROM koe_records`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for rows.Next() {
		var conf, uid string
		var seq int64
		var body []byte
		if err := rows.Scan(&conf, &uid, &seq, &body); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s/%s/%d", conf, uid, seq)] = body
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrateCopiesEverything(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), DatabaseFile)
	f := buildBolt(t, path)

	var progress bytes.Buffer
	st, err := Run(context.Background(), Options{Path: path, DSN: dsn, Progress: &progress, ProgressEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(st)
	// Records: a history of n turns holds its metadata, two records a
	// turn and two tool steps; bob's last history only its metadata.
	// Recall: every human and AI record but the two forgotten.
	want := Stats{Histories: 8, Records: (11 + 13 + 15) + (11 + 13 + 15 + 17) + 1, Images: 14, Summaries: 9,
		Recall: (8 + 10 + 12) + (8 + 10 + 12 + 14) - 2, Forgotten: 2, Marks: 7, Prompts: 4, Models: 1, Docs: 2, Chunks: 2}
	got := st
	got.Bytes, got.Elapsed = 0, 0
	if got != want {
		t.Errorf("stats\n got %+v\nwant %+v", got, want)
	}
	if st.Bytes < int64(2*len("fake picture bytes")+7*9000) {
		t.Errorf("%d bytes copied, fewer than the images alone", st.Bytes)
	}
	if !strings.Contains(progress.String(), "8 histories") {
		t.Errorf("no progress line for the 8th history in %q", progress.String())
	}

	src, err := bolt.OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, src, f)
	_ = src.Close()
	pg := openPG(t, dsn)
	after := snapshot(t, pg, f)
	for k, v := range before {
		if !reflect.DeepEqual(v, after[k]) {
			t.Errorf("%s differs:\nbbolt      %.300v\npostgresql %.300v", k, fmt.Sprintf("%+v", v), fmt.Sprintf("%+v", after[k]))
		}
	}
	if len(before) != len(after) {
		t.Errorf("%d values read from bbolt, %d from PostgreSQL", len(before), len(after))
	}
	// Records are the same JSON, byte for byte.
	if b, p := rawBolt(t, path), rawPG(t, dsn); !reflect.DeepEqual(b, p) {
		t.Errorf("stored JSON differs: %d records in bbolt, %d in PostgreSQL", len(b), len(p))
	}

	// The copy goes on as the original would: the next record follows the
	// last sequence number, and a forgotten entry stays forgotten.
	uid := f.histories["alice"][0]
	last, _ := pg.LastSeq(ctx, "alice", uid)
	if err := pg.Append(ctx, "alice", uid, koe.Record{Role: koe.RoleHuman, Content: "after the move"}); err != nil {
		t.Fatal(err)
	}
	if next, _ := pg.LastSeq(ctx, "alice", uid); next != last+1 {
		t.Errorf("appended at %d, want %d", next, last+1)
	}
	recall := before["alice/recall"].([]koe.RecallEntry)
	var forgotten koe.RecallEntry
	msgs := before["alice/"+uid+"/messages"].([]koe.Record)
	for _, m := range msgs {
		if m.Shown() {
			forgotten = koe.RecallEntry{HistoryUID: uid, Seq: m.Seq, Role: m.Role, Text: m.Content}
			break
		}
	}
	for _, e := range recall {
		if e.HistoryUID == uid && e.Seq == forgotten.Seq {
			t.Fatalf("entry %d was forgotten in bbolt but is listed", forgotten.Seq)
		}
	}
	// The copied mark is where indexing goes on from.
	mark, ok, err := pg.RecallMark(ctx, "alice", uid)
	if err != nil || !ok {
		t.Fatalf("the copied recall mark: %+v, %v, %v", mark, ok, err)
	}
	saved, err := pg.SaveRecall(ctx, "alice", uid, mark, koe.RecallMark{Seq: last + 1, Turn: 6}, []koe.RecallEntry{forgotten})
	if err != nil {
		t.Fatal(err)
	}
	if len(saved) != 0 {
		t.Errorf("a forgotten entry was indexed again after the migration: %+v", saved)
	}

	// A second run refuses: the store is not empty.
	_, err = Run(context.Background(), Options{Path: path, DSN: dsn})
	if err == nil || !strings.Contains(err.Error(), "already holds 8 histories, 2 documents and 4 prompts") || !strings.Contains(err.Error(), "-resume") {
		t.Fatalf("second run: %v, want a refusal naming -resume", err)
	}
	// With -resume it copies nothing again and changes nothing.
	st, err = Run(context.Background(), Options{Path: path, DSN: dsn, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Histories != 0 || st.Skipped != 8 || st.Records != 0 || st.Prompts != 0 || st.Docs != 0 || st.SkippedDocs != 2 || st.Models != 0 {
		t.Errorf("resume over a complete copy: %+v, want nothing copied", st)
	}
	if got, _ := pg.Messages(ctx, "alice", uid); len(got) != len(msgs)+1 {
		t.Errorf("alice's first history has %d records after the rerun, want %d", len(got), len(msgs)+1)
	}
}

// A migration stopped half-way leaves whole histories; -resume finishes it.
func TestMigrateInterruptedThenResumed(t *testing.T) {
	dsn := pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), DatabaseFile)
	f := buildBolt(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The progress line after the third history stops the migration.
	_, err := Run(ctx, Options{Path: path, DSN: dsn, ProgressEvery: 3, Progress: writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "-resume") {
		t.Fatalf("interrupted run: %v, want context.Canceled and a hint at -resume", err)
	}
	pg := openPG(t, dsn)
	c, err := pg.Contents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.Histories != 3 {
		t.Fatalf("%d histories after the interruption, want the 3 copied", c.Histories)
	}
	st, err := Run(context.Background(), Options{Path: path, DSN: dsn, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Histories != 5 || st.Skipped != 3 {
		t.Errorf("resume: %d copied, %d skipped, want 5 and 3", st.Histories, st.Skipped)
	}
	src, err := bolt.OpenReadOnly(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, src, f)
	_ = src.Close()
	after := snapshot(t, pg, f)
	if !reflect.DeepEqual(before, after) {
		t.Error("the resumed copy differs from the bbolt store")
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// A koe running on koe.db holds its lock: migrate says to stop it, and
// Main exits 1 with that message.
func TestMigrateLockedDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DatabaseFile)
	running, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	const dsn = "postgres://koe@127.0.0.1:1/koe"
	if _, err := Run(context.Background(), Options{Path: path, DSN: dsn, LockWait: 50 * time.Millisecond}); !errors.Is(err, bolt.ErrLocked) {
		t.Fatalf("Run beside a running koe: %v, want ErrLocked", err)
	}
	var stdout, stderr bytes.Buffer
	env := map[string]string{"KOE_DATABASE_URL": dsn}
	code := Main(context.Background(), []string{"-data", dir, "-lock-wait", "100ms"}, &stdout, &stderr, func(k string) string { return env[k] })
	if code != 1 || !strings.Contains(stderr.String(), "stop koe first") {
		t.Fatalf("exit %d, stderr %q; want 1 and \"stop koe first\"", code, stderr.String())
	}
}

// Bad input says what is wrong and exits non-zero.
func TestMigrateErrors(t *testing.T) {
	dir := t.TempDir()
	run := func(env map[string]string, args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"-data", dir}, args...), &stdout, &stderr, func(k string) string { return env[k] })
		return code, stderr.String()
	}
	if code, msg := run(nil); code != 1 || !strings.Contains(msg, "no PostgreSQL store to copy into") {
		t.Errorf("no DSN: exit %d, %q", code, msg)
	}
	if code, msg := run(map[string]string{"KOE_DATABASE_URL": "postgres://koe@127.0.0.1:1/koe"}); code != 1 || !strings.Contains(msg, "koe.db") || !strings.Contains(msg, "no such file") {
		t.Errorf("no koe.db: exit %d, %q", code, msg)
	}
	if code, msg := run(nil, "extra"); code != 2 || !strings.Contains(msg, "usage: koe migrate") {
		t.Errorf("extra argument: exit %d, %q", code, msg)
	}
	path := filepath.Join(dir, DatabaseFile)
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if code, msg := run(nil, "-dsn", "postgres://koe@127.0.0.1:1/koe?connect_timeout=5"); code != 1 || !strings.Contains(msg, "postgres store: connect") {
		t.Errorf("no server: exit %d, %q", code, msg)
	}
}

// Throughput: 100 histories of 100 records each.
func TestMigrateThroughput(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), DatabaseFile)
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const histories, records = 100, 100
	for h := range histories {
		var rs []koe.Record
		for i := range records - 1 {
			role := koe.RoleHuman
			if i%2 == 1 {
				role = koe.RoleAI
			}
			rs = append(rs, koe.Record{Role: role, Content: strings.Repeat(fmt.Sprintf("message %d of history %d. ", i, h), 4)})
		}
		if err := s.CreateWith(ctx, "bench", koe.NewHistoryUID(time.Now()), rs...); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	st, err := Run(context.Background(), Options{Path: path, DSN: dsn, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if st.Histories != histories || st.Records != histories*records {
		t.Fatalf("%d histories, %d records, want %d and %d", st.Histories, st.Records, histories, histories*records)
	}
	t.Logf("%d records (%s) in %s: %.0f records/s", st.Records, formatBytes(st.Bytes), st.Elapsed.Round(time.Millisecond), float64(st.Records)/st.Elapsed.Seconds())
}

// A merge never puts one character's vectors beside another model's.
func TestMigrateRefusesMixedVectorModels(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	path := filepath.Join(t.TempDir(), DatabaseFile)
	buildBolt(t, path)
	pg := openPG(t, dsn)
	if err := pg.SetRecallVectors(ctx, "alice", "other-model", nil); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), Options{Path: path, DSN: dsn, Resume: true})
	if err == nil || !strings.Contains(err.Error(), `made by "other-model", those in koe.db by "embed-small"`) {
		t.Fatalf("merge over another vector model: %v, want a refusal naming both", err)
	}
	c, err := pg.Contents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !c.Empty() {
		t.Errorf("the refused migration wrote %+v", c)
	}
	// The same model is no conflict.
	if err := pg.SetRecallVectors(ctx, "alice", "embed-small", nil); err != nil {
		t.Fatal(err)
	}
	if st, err := Run(context.Background(), Options{Path: path, DSN: dsn, Resume: true}); err != nil || st.Histories != 8 || st.Models != 0 {
		t.Fatalf("merge over the same model: %+v, %v; want 8 histories and the model left as it was", st, err)
	}
}
