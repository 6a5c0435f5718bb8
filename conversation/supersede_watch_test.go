package conversation_test

import (
	"strings"
	"testing"

	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
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
