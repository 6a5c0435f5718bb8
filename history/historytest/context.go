package historytest

import (
	"context"
	"errors"
	"testing"

	"koe"
)

// A call whose context has ended fails with the context's error and
// changes nothing, whichever method it is and however valid its
// arguments.
func testCancelledContext(t *testing.T, be Backend) {
	s := be.Open(t, StepClock(T0))
	uid := MustCreate(t, s, "c")
	MustAppend(t, s, "c", uid, koe.Record{Role: koe.RoleHuman, Content: "hi", Images: []koe.Image{{MimeType: "image/png", Data: Base64(Picture(1, 10))}}})
	MustAddSummary(t, s, "c", uid, Summary(uid, 1, 1, "a greeting"))
	MustSaveRecall(t, s, "c", uid, koe.RecallMark{Seq: 2, Turn: 1}, Entry(uid, 2, "hi"))
	before := be.Dump(t, s)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	doc, chunks := KnowledgeDoc("d", T0), KnowledgeChunks("d", 2, 4)
	entries := []koe.RecallEntry{Entry(uid, 2, "hi")}
	each := func(koe.RecallEntry) error { return nil }
	eachChunk := func(koe.KnowledgeChunk) error { return nil }
	calls := map[string]func() error{
		"Create":      func() error { _, err := s.Create(ctx, "c"); return err },
		"CreateWith":  func() error { return s.CreateWith(ctx, "c", koe.NewHistoryUID(T0)) },
		"Append":      func() error { return s.Append(ctx, "c", uid, koe.Record{Role: koe.RoleAI, Content: "x"}) },
		"Messages":    func() error { _, err := s.Messages(ctx, "c", uid); return err },
		"Since":       func() error { _, err := s.Since(ctx, "c", uid, 0, 10); return err },
		"Page":        func() error { _, _, err := s.Page(ctx, "c", uid, 0, 10); return err },
		"LastSeq":     func() error { _, err := s.LastSeq(ctx, "c", uid); return err },
		"Image":       func() error { _, _, err := s.Image(ctx, "c", uid, "2-0"); return err },
		"List":        func() error { _, err := s.List(ctx, "c"); return err },
		"Exists":      func() error { _, err := s.Exists(ctx, "c", uid); return err },
		"Delete":      func() error { return s.Delete(ctx, "c", uid) },
		"Confs":       func() error { _, err := s.Confs(ctx); return err },
		"AddSummary":  func() error { return s.AddSummary(ctx, "c", uid, Summary(uid, 2, 1, "x")) },
		"Summaries":   func() error { _, err := s.Summaries(ctx, "c", uid); return err },
		"SetPrompt":   func() error { return s.SetPrompt(ctx, "c", koe.PromptSystem, "x") },
		"Prompt":      func() error { _, _, err := s.Prompt(ctx, "c", koe.PromptSystem); return err },
		"RecallMark":  func() error { _, _, err := s.RecallMark(ctx, "c", uid); return err },
		"RecallMarks": func() error { _, err := s.RecallMarks(ctx, "c"); return err },
		"SaveRecall": func() error {
			_, err := s.SaveRecall(ctx, "c", uid, koe.RecallMark{Seq: 2, Turn: 1}, koe.RecallMark{Seq: 3, Turn: 2}, nil)
			return err
		},
		"SetRecallVectors":      func() error { return s.SetRecallVectors(ctx, "c", "m", entries) },
		"RecallVectorModel":     func() error { _, err := s.RecallVectorModel(ctx, "c"); return err },
		"ForEachRecall":         func() error { return s.ForEachRecall(ctx, "c", each) },
		"RecallSince":           func() error { _, err := s.RecallSince(ctx, "c", uid, 0, 10); return err },
		"ForgetRecall":          func() error { _, err := s.ForgetRecall(ctx, "c", uid, 2); return err },
		"ForgetRecalls":         func() error { _, err := s.ForgetRecalls(ctx, "c", uid, []uint64{2}); return err },
		"ForgottenRecalls":      func() error { _, err := s.ForgottenRecalls(ctx, "c", ""); return err },
		"FillRecallVectors":     func() error { _, err := s.FillRecallVectors(ctx, "c", "m", entries); return err },
		"ClearRecall":           func() error { return s.ClearRecall(ctx, "c") },
		"PutKnowledgeDoc":       func() error { return s.PutKnowledgeDoc(ctx, "c", doc, "text", nil) },
		"KnowledgeDocs":         func() error { _, err := s.KnowledgeDocs(ctx, "c"); return err },
		"KnowledgeText":         func() error { _, _, err := s.KnowledgeText(ctx, "c", "d"); return err },
		"DeleteKnowledgeDoc":    func() error { _, err := s.DeleteKnowledgeDoc(ctx, "c", "d"); return err },
		"KnowledgeConfs":        func() error { _, err := s.KnowledgeConfs(ctx); return err },
		"PutKnowledgeChunks":    func() error { return s.PutKnowledgeChunks(ctx, "c", "d", chunks) },
		"DeleteKnowledgeChunks": func() error { return s.DeleteKnowledgeChunks(ctx, "c", "d") },
		"ForEachKnowledgeChunk": func() error { return s.ForEachKnowledgeChunk(ctx, "c", eachChunk) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended context: err = %v, want context.Canceled", name, err)
		}
	}
	if after := be.Dump(t, s); after != before {
		t.Fatalf("calls with an ended context changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
