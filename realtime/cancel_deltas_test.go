package realtime_test

import (
	"fmt"
	"testing"
)

// response.cancel landing while a spoken reply's sentences are still
// being rendered: what was heard is read under the connection's lock
// while the deltas note their sentences (run with -race).
func TestRealtimeCancelMidAudioDeltas(t *testing.T) {
	var tokens []string
	for i := range 60 {
		tokens = append(tokens, fmt.Sprintf("Sentence number %d. ", i))
	}
	addr, _ := rtKoe(t, answer(tokens...))
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	// Each round gives the cancel another chance to land between a
	// sentence being noted and its deltas being written.
	for round := range 20 {
		c.say(fmt.Sprintf("talk to me %d", round))
		c.until("response.output_audio.delta")
		c.send(map[string]any{"type": "response.cancel"})
		if done := c.until("response.done"); done.str("response.status") != "cancelled" {
			t.Fatalf("round %d: response.done = %s, want cancelled", round, done.raw)
		}
	}
}
