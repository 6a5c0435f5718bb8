package realtime_test

import (
	"strings"
	"testing"

	"koe/testkit/fakellm"
)

// A function_call_output item refused for its id or its place leaves the
// call waiting: its result is not kept, and the corrected retry is taken
// and answered from.
func TestFunctionOutputRefusedThenRetried(t *testing.T) {
	addr, llm := rtKoe(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_r1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}},
		fakellm.Reply{Tokens: []string{"Snow in Oslo."}},
	))
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"output_modalities": []string{"text"}, "tools": []any{rtfWeather}}})
	c.until("session.updated")
	c.say("weather in Oslo?")
	c.until("response.done")
	output := func(event string, fields map[string]any) map[string]any {
		it := map[string]any{"type": "function_call_output", "call_id": "call_r1", "output": "snow"}
		for k, v := range fields {
			it[k] = v
		}
		return map[string]any{"type": "conversation.item.create", "event_id": event, "item": it}
	}
	c.send(output("long", map[string]any{"id": strings.Repeat("x", 65)}))
	if e := c.expect("error"); e.str("error.event_id") != "long" || e.str("error.param") != "item.id" {
		t.Fatalf("an id too long answered %s", e.raw)
	}
	bad := output("place", nil)
	bad["previous_item_id"] = "no_such_item"
	c.send(bad)
	if e := c.expect("error"); e.str("error.event_id") != "place" || e.str("error.code") != "item_not_found" {
		t.Fatalf("an unknown previous_item_id answered %s", e.raw)
	}
	c.send(output("good", nil))
	if e := c.expect("conversation.item.added"); e.str("item.call_id") != "call_r1" {
		t.Fatalf("the corrected retry answered %s", e.raw)
	}
	c.send(map[string]any{"type": "response.create"})
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Fatalf("response.done = %s", done.raw)
	}
	reqs := llm.Requests()
	last := reqs[len(reqs)-1].Messages
	var results []string
	for _, m := range last {
		if m.Role == "tool" {
			results = append(results, m.Content)
		}
	}
	if strings.Join(results, "|") != "snow" {
		t.Errorf("the model got tool results %q, want the one result", results)
	}
}
