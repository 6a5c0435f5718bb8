package chatcli

import (
	"bytes"
	"encoding/json"
	"testing"

	"koe/client"
	"koe/protocol"
)

// Event builders for the view's tests.
func tok(s string) client.Event { return client.Event{Type: protocol.EventToken, Token: s} }
func st(id, state string) client.Event {
	return client.Event{Type: protocol.EventStatus, Status: &protocol.StatusBody{TaskID: id, State: state}}
}
func stErr(id, details string) client.Event {
	return client.Event{Type: protocol.EventStatus, Status: &protocol.StatusBody{TaskID: id, State: protocol.StatusError, ErrorDetails: details}}
}
func msg(m protocol.ChatMessage) client.Event {
	return client.Event{Type: protocol.EventMessage, Message: &m}
}
func ai(content string) client.Event {
	return msg(protocol.ChatMessage{Type: protocol.MessageAI, Content: content})
}
func end() client.Event { return client.Event{Type: protocol.EventEnd} }

// The plain view of event sequences the server's tests do not easily
// produce.
func TestPlainView(t *testing.T) {
	interrupted := protocol.ChatMessage{Type: protocol.MessageAI, Content: "la la la", AdditionalKwargs: protocol.AdditionalKwargs{Interrupted: true}}
	cases := []struct {
		name   string
		events []client.Event
		want   string
	}{
		{"tokens then their message",
			[]client.Event{st("llm:1", "start"), tok("Hel"), tok("lo."), st("llm:1", "end"), ai("Hello."), end()},
			"koe> Hello.\n"},
		{"no tokens (stream_tokens false)",
			[]client.Event{st("llm:1", "start"), st("llm:1", "end"), ai("Hello."), end()},
			"koe> Hello.\n"},
		{"a stopped turn that kept more than it streamed",
			[]client.Event{st("llm:1", "start"), tok("la"), tok(" la "), st("llm:1", "end"), msg(interrupted), end()},
			"koe> la la la\n⏹ interrupted\n"},
		{"a stopped turn that streamed more than it kept",
			[]client.Event{st("llm:1", "start"), tok("la la la la"), st("llm:1", "end"), msg(interrupted), end()},
			"koe> la la la la\n⏹ interrupted\n"},
		{"a second cycle's joining space",
			[]client.Event{st("llm:2", "start"), tok(" "), tok(" It"), tok(" is."), st("llm:2", "end"), ai("It is."), end()},
			"koe> It is.\n"},
		{"a failed LLM",
			[]client.Event{st("llm:1", "start"), stErr("llm:1", "HTTP 500"), {Type: protocol.EventError, Error: "the LLM failed"}, end()},
			"✗ thinking: HTTP 500\nerror: the LLM failed\n"},
		{"a failed tool",
			[]client.Event{
				msg(protocol.ChatMessage{Type: protocol.MessageAI, ToolCalls: []protocol.ChatToolCall{{ID: "c1", Name: "weather", Args: json.RawMessage(`{ "city": "Paris" }`)}}}),
				st("tool:c1", "start"), stErr("tool:c1", "timed out"),
				msg(protocol.ChatMessage{Type: protocol.MessageTool, ToolCallID: "c1", Name: "weather", Status: protocol.ToolFailed, Content: "the weather service timed out"}),
				end(),
			},
			"⋯ weather {\"city\":\"Paris\"}\n✗ weather {\"city\":\"Paris\"}: timed out\n  ↳ error: the weather service timed out\n"},
		{"a long tool result",
			[]client.Event{
				msg(protocol.ChatMessage{Type: protocol.MessageAI, ToolCalls: []protocol.ChatToolCall{{ID: "c1", Name: "files", Args: json.RawMessage(`{}`)}}}),
				st("tool:c1", "start"), st("tool:c1", "end"),
				msg(protocol.ChatMessage{Type: protocol.MessageTool, ToolCallID: "c1", Status: protocol.ToolSuccess, Content: "1\n2\n3\n4\n5\n6\n7\n8"}),
				end(),
			},
			"⋯ files\n✓ files\n  ↳ 1\n    2\n    3\n    4\n    5\n    6\n    (2 more lines)\n"},
		{"citations under the answer",
			[]client.Event{st("llm:1", "start"), tok("Zephyr [1], see [2]."), st("llm:1", "end"), ai("Zephyr [1], see [2]."),
				{Type: protocol.EventCitations, Citations: &protocol.CitationsBody{Citations: []protocol.Citation{
					{Document: 1, Title: "Rules", File: "rules.md", Section: "Mascot"},
					{Document: 2, Title: "Guide", File: "guide.pdf", Page: 3},
				}}}, end()},
			"koe> Zephyr [1], see [2].\n  [1] Rules (rules.md, Mascot)\n  [2] Guide (guide.pdf, page 3)\n"},
		{"cut off at the length limit",
			[]client.Event{st("llm:1", "start"), tok("Once upon"), st("llm:1", "end"),
				msg(protocol.ChatMessage{Type: protocol.MessageAI, Content: "Once upon", ResponseMetadata: protocol.ResponseMetadata{FinishReason: "length"}}), end()},
			"koe> Once upon\n⏹ cut off: the reply reached the model's length limit\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			v := newView(&out, false)
			for _, ev := range tc.events {
				v.show(ev)
			}
			if out.String() != tc.want {
				t.Errorf("shows:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}
