package realtime_test

import (
	"strings"
	"testing"

	"koe/config"
	"koe/testkit/fakellm"
)

// rtfWeather is a client's function as a Go client defines it.
var rtfWeather = map[string]any{"type": "function", "name": "get_weather", "description": "The weather now.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}

// Tools given with one response.create are that response's only: the
// model is offered them, told the named tool_choice, and the next
// response offers the session's (none).
func TestFunctionsPerResponse(t *testing.T) {
	addr, llm := rtKoe(t, answer("Sunny."))
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"output_modalities": []string{"text"}}})
	c.expect("session.updated")
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "weather?"}}}})
	c.send(map[string]any{"type": "response.create", "response": map[string]any{
		"tools": []any{rtfWeather}, "tool_choice": map[string]any{"type": "function", "name": "get_weather"}}})
	c.until("response.done")
	c.say("and now?")
	c.until("response.done")
	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if strings.Join(reqs[0].Tools, ",") != "get_weather" || reqs[0].ToolChoice != `{"type":"function","function":{"name":"get_weather"}}` {
		t.Errorf("the response's request: tools %q, tool_choice %s", reqs[0].Tools, reqs[0].ToolChoice)
	}
	if len(reqs[1].Tools) != 0 || reqs[1].ToolChoice != "" {
		t.Errorf("the next response's request: tools %q, tool_choice %s", reqs[1].Tools, reqs[1].ToolChoice)
	}
}

// A tool of koe's that fails shows to a GA client as an mcp_call item that
// failed, with the tool's error; a beta client, whose API has no such
// item, sees none of it, only the answer.
func TestServerToolFailure(t *testing.T) {
	for _, beta := range []bool{false, true} {
		addr, _ := rtKoe(t, fakellm.Script(
			fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "k1", Name: "calculator", Arguments: `{"expression":"2 +"}`}}},
			fakellm.Reply{Tokens: []string{"I could not work it out."}},
		), func(cfg *config.Config) { cfg.Character.Tools.Enabled = []string{"calculator"} })
		query := ""
		if beta {
			query = "model=koe"
		}
		header := map[string][]string{}
		if beta {
			header["OpenAI-Beta"] = []string{"realtime=v1"}
		}
		c := rtDial(t, addr, query, header)
		c.until("conversation.created")
		c.say("what is 2 +?")
		c.until("response.done")
		var mcp []string
		for _, e := range c.got {
			if strings.Contains(e.typ(), "mcp_call") || e.str("item.type") == "mcp_call" {
				mcp = append(mcp, e.typ())
			}
		}
		if beta {
			if len(mcp) != 0 {
				t.Errorf("beta: mcp_call events %q", mcp)
			}
			continue
		}
		failed := rtaEvent(t, c, "response.mcp_call.failed")
		done := c.got[0]
		for _, e := range c.got {
			if e.typ() == "response.output_item.done" && e.str("item.type") == "mcp_call" {
				done = e
			}
		}
		if done.str("item.id") != failed.str("item_id") || done.str("item.server_label") != "koe" || done.str("item.name") != "calculator" ||
			done.str("item.error.type") != "tool_execution_error" || done.str("item.error.message") == "" || done.at("item.output") != nil {
			t.Errorf("the failed call's item: %s", done.raw)
		}
	}
}
