package realtime_test

import (
	"strings"
	"testing"

	"koe/config"
	"koe/testkit/fakellm"
)

// The message item is announced with the first words, at its place among
// the tool calls: a koe tool's call made before them comes first, a
// client's function called after them last, and response.done lists the
// output in that order, as the API numbers output_index.
func TestOutputIndexFollowsTheWords(t *testing.T) {
	addr, _ := rtKoe(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "k1", Name: "calculator", Arguments: `{"expression":"2+2"}`}}},
		fakellm.Reply{Tokens: []string{"Four. ", "Now the weather."},
			ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}},
	), func(cfg *config.Config) { cfg.Character.Tools.Enabled = []string{"calculator"} })
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"output_modalities": []string{"text"}, "tools": []any{rtfWeather}}})
	c.until("session.updated")
	c.say("2+2, then the weather in Oslo?")
	c.until("response.done")
	index := map[string]float64{} // item type → output_index
	var added []string
	for _, e := range c.got {
		if e.typ() != "response.output_item.added" {
			continue
		}
		typ := e.str("item.type")
		added = append(added, typ)
		index[typ], _ = e.at("output_index").(float64)
	}
	if strings.Join(added, ",") != "mcp_call,message,function_call" || index["mcp_call"] != 0 || index["message"] != 1 || index["function_call"] != 2 {
		t.Fatalf("items added %q at %v; want mcp_call, message, function_call at 0, 1, 2", added, index)
	}
	msg := ""
	for _, e := range c.got {
		if e.typ() == "response.output_item.added" && e.str("item.type") == "message" {
			msg = e.str("item.id")
		}
	}
	for _, e := range c.got {
		if e.str("item_id") == msg && e.at("output_index") != 1.0 {
			t.Errorf("%s of the message at output_index %v", e.typ(), e.at("output_index"))
		}
	}
	done := c.got[len(c.got)-1]
	out, _ := done.at("response.output").([]any)
	var types []string
	for _, o := range out {
		types = append(types, o.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "mcp_call,message,function_call" {
		t.Errorf("response.done's output %q", types)
	}
}
