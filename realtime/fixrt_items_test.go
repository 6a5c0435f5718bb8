package realtime_test

import (
	"fmt"
	"strings"
	"testing"
)

// Items no response answers are bounded in number, not only in bytes: a
// client adding one-letter items and never asking for a response is
// refused at koe's item limit, and a response makes room again.
func TestRealtimeUnansweredItemsBounded(t *testing.T) {
	addr, _ := rtKoe(t, answer("Noted."))
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	item := func(id string) map[string]any {
		return map[string]any{"type": "conversation.item.create", "event_id": "ev_" + id, "item": map[string]any{"id": id, "type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": "a"}}}}
	}
	for i := range 1024 {
		c.send(item(fmt.Sprintf("i%d", i)))
		c.expect("conversation.item.added")
		c.expect("conversation.item.done")
	}
	c.send(item("over"))
	if e := c.expect("error"); e.str("error.event_id") != "ev_over" || !strings.Contains(e.str("error.message"), "1024") {
		t.Fatalf("item 1025 answered %s", e.raw)
	}
	c.send(map[string]any{"type": "response.create"})
	c.until("response.done")
	c.send(item("after"))
	c.until("conversation.item.done")
}
