package conversation_test

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"koe"
	"koe/agent"
	"koe/bolt"
	"koe/conversation"
	"koe/knowledge"
	"koe/llm"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/mock"
	"koe/testkit/redistest"
)

// withKnowledge gives the hub a knowledge service over the rig's store.
func withKnowledge(k conversation.Knowledge) rigOption {
	return func(d *conversation.Deps) { d.Knowledge = k }
}

func knowledgeService(t *testing.T, st knowledge.DocStore) *knowledge.Service {
	t.Helper()
	k := knowledge.New(knowledge.Options{Config: knowledge.DefaultConfig(), Docs: st, Index: knowledge.NewMemoryIndex(), Logger: koetest.Logger(t)})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := k.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func wantKind(t *testing.T, what string, err error, kind koe.Kind, text string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want kind %d", what, kind)
	}
	if p := conversation.Explain(err); p.Kind != kind || !strings.Contains(p.Message, text) {
		t.Fatalf("%s: %v (kind %d), want kind %d saying %q", what, err, p.Kind, kind, text)
	}
}

// A file attached on instance B to a history whose reply instance A is
// making is refused, as it is on A itself; once A's turn is over it is
// attached. With the coordination service unreachable, B says it cannot
// tell.
func TestAttachFileRefusedDuringAnotherInstancesTurn(t *testing.T) {
	srv := redistest.Start(t)
	// Attached files are read by the knowledge service, whose own store
	// they do not touch.
	kst, err := bolt.Open(filepath.Join(t.TempDir(), "knowledge.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kst.Close() })
	k := knowledgeService(t, kst)
	var g *gate
	var calls atomic.Int32
	r := newRig(t, func(fakellm.Request) fakellm.Reply {
		if calls.Add(1) == 2 {
			return g.reply("Partial", " answer", " here.")
		}
		return fakellm.Reply{Tokens: fakellm.Words("Done.")}
	}, withCoordinator(redisCoordinator(t, srv)), withKnowledge(k))
	g = newGate(t)
	deps := conversation.Deps{
		Config:      conversation.DefaultConfig(),
		Store:       r.store,
		Characters:  r.chars,
		NewLLM:      func(c agent.Config) agent.LLM { return llm.New(c, nil) },
		Knowledge:   k,
		Coordinator: redisCoordinator(t, srv),
		Logger:      koetest.Logger(t).With("instance", "B"),
	}
	b := conversation.NewHub(deps)
	t.Cleanup(b.Close)
	bOut := mock.NewSender(1 << 12)
	bSess := b.Open(r.ctx, bOut, conversation.SessionOptions{ClientUID: "client-b", KoeEvents: true, Logger: deps.Logger})
	t.Cleanup(bSess.Close)

	r.turn("zero")
	uid := r.sess.Info().HistoryUID
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "first"})
	r.until(protocol.TypeToken, "")

	file := func(name string) knowledge.Upload {
		return knowledge.Upload{Name: name, Mime: "text/plain", Data: []byte("Notes for " + name + ".\n")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err = b.AttachFile(ctx, "c1", uid, file("during.txt"))
	wantKind(t, "REST attach on B during A's turn", err, koe.Conflict, "a reply is being made in this history")
	if err := bSess.Dispatch(protocol.Inbound{Type: protocol.TypeFetchAndSetHistory, HistoryUID: uid}); err != nil {
		t.Fatal(err)
	}
	err = bSess.Dispatch(protocol.Inbound{Type: protocol.TypeAttachFile, Name: "during.txt", Mime: "text/plain",
		Data: base64.StdEncoding.EncodeToString([]byte("Notes.\n"))})
	wantKind(t, "WebSocket attach on B during A's turn", err, koe.Conflict, "a reply is being made in this history")

	g.open()
	r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	r.until(protocol.TypeControl, protocol.ControlChainEnd)
	// A's own attach waits for its finishing turn, which has then let the
	// history go.
	if _, err := r.hub.AttachFile(ctx, "c1", uid, file("a.txt")); err != nil {
		t.Fatalf("attach on A after its turn: %v", err)
	}
	if _, err := b.AttachFile(ctx, "c1", uid, file("b.txt")); err != nil {
		t.Fatalf("attach on B after A's turn: %v", err)
	}
	var files []string
	for _, rec := range r.records() {
		if rec.Role == koe.RoleFile {
			files = append(files, rec.Name)
		}
	}
	if strings.Join(files, " ") != "a.txt b.txt" {
		t.Fatalf("files stored: %q, want a.txt b.txt", files)
	}

	srv.Stop()
	_, err = b.AttachFile(ctx, "c1", uid, file("down.txt"))
	wantKind(t, "attach on B with Redis down", err, koe.Unavailable, "could not check whether a reply is being made")
}
