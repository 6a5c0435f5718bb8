package realtime_test

import (
	"fmt"
	"strings"
	"testing"

	"koe/config"
)

// Items no response answers are bounded in number, not only in bytes: a
// client adding one-letter items and never asking for a response is
// refused at server.realtime_max_items, and a response makes room again.
func TestRealtimeUnansweredItemsBounded(t *testing.T) {
	addr, _ := rtKoe(t, answer("Noted."), func(c *config.Config) { c.Server.RealtimeMaxItems = 32 })
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	item := func(id string) map[string]any {
		return map[string]any{"type": "conversation.item.create", "event_id": "ev_" + id, "item": map[string]any{"id": id, "type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": "a"}}}}
	}
	for i := range 32 {
		c.send(item(fmt.Sprintf("i%d", i)))
		c.expect("conversation.item.added")
		c.expect("conversation.item.done")
	}
	c.send(item("over"))
	if e := c.expect("error"); e.str("error.event_id") != "ev_over" || !strings.Contains(e.str("error.message"), "server.realtime_max_items (32)") {
		t.Fatalf("item 33 answered %s", e.raw)
	}
	c.send(map[string]any{"type": "response.create"})
	c.until("response.done")
	c.send(item("after"))
	c.until("conversation.item.done")
}
