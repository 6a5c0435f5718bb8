package conversation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe"
	"koe/agent"
	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
)

// observed records what a hub tells its Observer.
type observed struct {
	mu       sync.Mutex
	started  int
	ended    []string
	tokens   int
	failures []string
}

func (o *observed) TurnStarted() { o.mu.Lock(); o.started++; o.mu.Unlock() }
func (o *observed) TurnEnded(outcome string) {
	o.mu.Lock()
	o.ended = append(o.ended, outcome)
	o.mu.Unlock()
}
func (o *observed) FirstToken(time.Duration) { o.mu.Lock(); o.tokens++; o.mu.Unlock() }
func (o *observed) FirstAudio(time.Duration) {}
func (o *observed) DependencyFailed(service string, err error) {
	var le *agent.LLMError
	kind := "?"
	if errors.As(err, &le) && le.Kind == agent.KindUnauthorized {
		kind = "unauthorized"
	}
	o.mu.Lock()
	o.failures = append(o.failures, service+":"+kind)
	o.mu.Unlock()
}
func (o *observed) SessionOpened(string) func() { return func() {} }

// syncBuffer is a log destination safe for the session's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestTurnIsObservedAndLogged: a completed turn and a turn the LLM fails
// are told to the Observer as they ended, and the failed turn's log line
// names its history and its turn.
func TestTurnIsObservedAndLogged(t *testing.T) {
	obs := &observed{}
	logs := &syncBuffer{}
	r := newRig(t, func(req fakellm.Request) fakellm.Reply {
		if strings.Contains(req.UserWords(), "fail") {
			return fakellm.Reply{Status: http.StatusUnauthorized, ErrorMessage: "bad key"}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Hello there.")}
	}, func(d *conversation.Deps) {
		d.Observer = obs
		d.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	r.turn("hi")
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "fail please"})
	got := r.until(protocol.TypeControl, protocol.ControlChainEnd)
	var runID string
	for _, f := range got {
		if f.Type == protocol.TypeMessage {
			var m protocol.MessageEvent
			mustUnmarshal(t, f.JSON, &m)
			runID = m.Content.RunID
		}
	}

	obs.mu.Lock()
	if obs.started != 2 || strings.Join(obs.ended, ",") != "completed,failed" || obs.tokens != 1 ||
		strings.Join(obs.failures, ",") != "llm:unauthorized" {
		t.Errorf("observed: started %d, ended %v, first tokens %d, failures %v", obs.started, obs.ended, obs.tokens, obs.failures)
	}
	obs.mu.Unlock()

	uid := r.sess.Info().HistoryUID
	var failed map[string]any
	for _, l := range logs.lines() {
		if l["msg"] == "LLM call failed" {
			failed = l
		}
	}
	if failed == nil {
		t.Fatal("no log line for the failed LLM call")
	}
	turnID, _ := failed["turn_id"].(string)
	if failed["history_uid"] != uid || !strings.HasPrefix(turnID, "run-") || turnID != runID {
		t.Errorf("the failed turn's log line: history_uid %v (want %s), turn_id %v (run_id %q)", failed["history_uid"], uid, failed["turn_id"], runID)
	}
}

// A turn whose records could not be stored is not counted as completed:
// the client was told, and so is the operator.
func TestUnsavedTurnIsCountedApart(t *testing.T) {
	obs := &observed{}
	r := newRig(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words("Hello there.")}
	}, func(d *conversation.Deps) { d.Observer = obs })
	r.turn("hi")
	r.store.AppendFn = func(ctx context.Context, conf, uid string, rec koe.Record) error {
		if rec.Role == koe.RoleAI {
			return errors.New("disk full")
		}
		return r.real.Append(ctx, conf, uid, rec)
	}
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "and again"})
	got := r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	got = append(got, r.until(protocol.TypeControl, protocol.ControlChainEnd)...)
	if !slices.ContainsFunc(got, func(f mock.Frame) bool {
		return f.Type == protocol.TypeError && strings.Contains(f.Text, "could not save the reply")
	}) {
		t.Errorf("the client was not told the reply was not saved: %v", frameTypes(got))
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if strings.Join(obs.ended, ",") != "completed,unsaved" {
		t.Errorf("the turns ended as %v, want completed then unsaved", obs.ended)
	}
}
