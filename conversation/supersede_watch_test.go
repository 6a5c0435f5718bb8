package conversation_test

import (
	"strings"
	"testing"

	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
)

// A turn that has said everything and waits for its playback, stopped by
// the client's next input, leaves its watchers their copies: a Realtime
// client starts its next response at response.done (backend-synth-complete),
// and a watcher whose connection had not yet written the turn's frames then
// dropped them (their context had ended), so that it missed the function
// call the client was handed.
func TestSupersededAfterEverythingSaidKeepsWatchersFrames(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("The first answer.")},
		fakellm.Reply{Tokens: fakellm.Words("The second answer.")},
	))
	w := &chatStopWatcher{got: make(chan offered, 4096)}
	stopWatching, err := r.hub.Watchers().Watch(protocol.WatchTarget{ClientUID: "client-1"}, w, conversation.WatchOptions{ClientUID: "watcher", KoeEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWatching()

	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "first"})
	r.until(protocol.TypeBackendSynthComplete, "")
	first := w.until(t, func(o offered) bool { return strings.Contains(o.data, "The first answer.") })
	// Not played: the turn waits for its playback, and the next input
	// stops it.
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "second"})
	w.until(t, func(o offered) bool { return strings.Contains(o.data, "The second answer.") })
	if err := first.ctx.Err(); err != nil {
		t.Fatalf("the first turn's frames were offered to its watchers with a context that ended when the next turn began (%v): a connection drops them unwritten", err)
	}
	r.playedTurn("second")
}

// A Realtime session's turn that has said everything and waits out its
// playback, when its client starts the next response (as it may at
// response.done), ends as a completed turn: stored whole, and its watchers
// get its chain-end, not an interrupt the client never made.
func TestRealtimeNextResponseCompletesTheTurnBefore(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("One two three. Four five six.")},
		fakellm.Reply{Tokens: fakellm.Words("Seven.")},
	), rtaSecondTTS(t))
	out := mock.NewSender(1 << 12)
	sess, err := r.hub.OpenClient(r.ctx, out, conversation.SessionOptions{ClientUID: "rt", PlaysItself: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	w := &chatStopWatcher{got: make(chan offered, 4096)}
	stopWatching, err := r.hub.Watchers().Watch(protocol.WatchTarget{ClientUID: "rt"}, w, conversation.WatchOptions{ClientUID: "watcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWatching()

	if err := sess.Respond(conversation.Response{Text: "count"}); err != nil {
		t.Fatal(err)
	}
	w.until(t, func(o offered) bool { return strings.Contains(o.data, `"backend-synth-complete"`) })
	// Two seconds of audio to play: the next response comes first.
	if err := sess.Respond(conversation.Response{Text: "go on"}); err != nil {
		t.Fatal(err)
	}
	var ends []string
	for {
		o := w.until(t, func(o offered) bool {
			return strings.Contains(o.data, `"control"`) && !strings.Contains(o.data, "conversation-chain-start")
		})
		ends = append(ends, o.data)
		if strings.Contains(o.data, "conversation-chain-end") {
			break
		}
	}
	if want := `{"type":"control","text":"conversation-chain-end"}`; len(ends) != 1 || ends[0] != want {
		t.Fatalf("after the next response began, the watcher got %q before the turn's end, want only %s", ends, want)
	}
	// Stored before its chain-end went out.
	info := sess.Info()
	recs, err := r.real.Messages(t.Context(), info.ConfUID, info.HistoryUID)
	if err != nil {
		t.Fatal(err)
	}
	if got := aiRecords(recs); len(got) == 0 || got[0] != "One two three. Four five six." {
		t.Fatalf("the replies were stored as %q, want the first one whole", got)
	}
}
