package realtime_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/testkit"
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

// A koe.v1 watcher of the session sees the function call round trip as
// the turn makes it for every audience: the call handed to the client,
// the call and its result as messages, then the answer.
func TestFunctionCallWatched(t *testing.T) {
	addr, _ := rtKoe(t, fakellm.Script(
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "call_w1", Name: "get_weather", Arguments: `{"city":"Oslo"}`}}},
		fakellm.Reply{Tokens: []string{"Snow in Oslo."}},
	))
	c := rtDial(t, addr, "", nil)
	id := c.expect("session.created").str("session.id")
	w := rtWatcher(t, addr, id)
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"output_modalities": []string{"text"}, "tools": []any{rtfWeather}}})
	c.until("session.updated")
	c.say("weather in Oslo?")
	c.until("response.done")
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "function_call_output", "call_id": "call_w1", "output": "snow"}})
	c.send(map[string]any{"type": "response.create"})
	c.until("response.done")

	_ = w.SetReadDeadline(time.Now().Add(testkit.HangGuard))
	var seen []string
	for {
		_, data, err := w.ReadMessage()
		if err != nil {
			t.Fatalf("the watcher saw %q, then: %v", seen, err)
		}
		var m struct {
			Type  string `json:"type"`
			Calls []struct {
				CallID    string `json:"call_id"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"calls"`
			Raw json.RawMessage `json:"content"`
			// Content is a message's (other frames' content is text).
			Content struct {
				Type       string `json:"type"`
				Content    string `json:"content"`
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID string `json:"id"`
				} `json:"tool_calls"`
			} `json:"-"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if m.Type == "message" {
			if err := json.Unmarshal(m.Raw, &m.Content); err != nil {
				t.Fatal(err)
			}
		}
		switch {
		case m.Type == "client-tool-calls":
			seen = append(seen, "handed "+m.Calls[0].CallID+" "+m.Calls[0].Name+" "+m.Calls[0].Arguments)
		case m.Type == "message" && len(m.Content.ToolCalls) > 0:
			seen = append(seen, "call "+m.Content.ToolCalls[0].ID)
		case m.Type == "message" && m.Content.Type == "tool":
			seen = append(seen, "result "+m.Content.ToolCallID+" "+m.Content.Content)
		case m.Type == "message" && m.Content.Type == "ai":
			seen = append(seen, "answer "+m.Content.Content)
		}
		if len(seen) > 0 && strings.HasPrefix(seen[len(seen)-1], "answer") {
			break
		}
	}
	want := []string{"call call_w1", `handed call_w1 get_weather {"city":"Oslo"}`, "result call_w1 snow", "answer Snow in Oslo."}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("the watcher saw %q, want %q", seen, want)
	}
}
