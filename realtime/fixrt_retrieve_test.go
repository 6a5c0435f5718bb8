package realtime_test

import (
	"testing"
	"time"

	"koe/testkit"
	"koe/testkit/fakellm"
)

// conversation.item.retrieve of the assistant's message while it is
// being said shows it, in progress, as far as it went (the SDK's types
// declare the item; it was null).
func TestRealtimeRetrieveInProgressItem(t *testing.T) {
	release := make(chan struct{})
	addr, _ := rtKoe(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"First sentence. ", "Second ", "sentence."}, BeforeChunk: func(i int) {
			if i == 1 {
				select {
				case <-release:
				case <-time.After(testkit.HangGuard):
				}
			}
		}}
	})
	t.Cleanup(func() { close(release) })
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"output_modalities": []string{"text"}}})
	c.expect("session.updated")
	c.say("tell me")
	delta := c.until("response.output_text.delta")
	c.send(map[string]any{"type": "conversation.item.retrieve", "item_id": delta.str("item_id")})
	got := c.until("conversation.item.retrieved")
	content, _ := got.at("item.content").([]any)
	if got.str("item.id") != delta.str("item_id") || got.str("item.role") != "assistant" || got.str("item.status") != "in_progress" ||
		len(content) != 1 || content[0].(map[string]any)["text"] != "First sentence. " {
		t.Fatalf("retrieved %s", got.raw)
	}
}
