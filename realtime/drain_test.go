package realtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// A drain (koe restarting) lets the running response finish, refuses a
// new one, and sends the client elsewhere with 1012, as for /client-ws.
func TestRealtimeDrainFinishesResponse(t *testing.T) {
	release := make(chan struct{})
	llm := koetest.StartLLM(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"Almost ", "done."}, BeforeChunk: func(i int) {
			if i == 1 {
				select {
				case <-release:
				case <-time.After(testkit.HangGuard):
				}
			}
		}}
	})
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	cfg.Server.DrainTimeout = testkit.HangGuard
	m, logs := koetest.StartKoeLogged(t, cfg)
	c := rtDial(t, m.Addr(), "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"output_modalities": []string{"text"}}})
	c.expect("session.updated")
	c.say("go on")
	c.until("response.output_text.delta")

	drained := make(chan struct{})
	go func() { defer close(drained); m.Drain(context.Background()) }()
	logs.WaitFor("drain started: /readyz answers 503, new sessions and turns go elsewhere; running turns finish", 1)
	close(release)
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Errorf("the running response was not let finish: %s", done.raw)
	}
	for {
		select {
		case e := <-c.events:
			if e.err == nil {
				continue
			}
			var ce *websocket.CloseError
			if !errors.As(e.err, &ce) || ce.Code != websocket.CloseServiceRestart {
				t.Fatalf("connection ended with %v, want 1012 service restart", e.err)
			}
			<-drained
			return
		case <-time.After(testkit.HangGuard):
			t.Fatal("the client was not sent elsewhere after its response")
		}
	}
}
