package agent

import (
	"reflect"
	"testing"
)

func TestAlternate(t *testing.T) {
	img := ContentPart{ImageURL: "data:image/png;base64,AAAA", Detail: ImageDetailAuto}
	call := []ToolCall{{ID: "c1", Name: "look", Arguments: "{}"}}
	u := func(text string) WireMessage { return WireMessage{Role: RoleUser, Content: text} }
	a := func(text string) WireMessage { return WireMessage{Role: RoleAssistant, Content: text} }
	for _, tc := range []struct {
		name    string
		in, out []WireMessage
	}{
		{"alternating already", []WireMessage{u("hi"), a("hello"), u("bye")}, []WireMessage{u("hi"), a("hello"), u("bye")}},
		{"persona, user, reminder", []WireMessage{u("P"), u("hi"), u("R")}, []WireMessage{u("P\n\nhi\n\nR")}},
		{"empty texts leave no blank lines", []WireMessage{u(""), u("hi"), u("")}, []WireMessage{u("hi")}},
		{"images: persona joins the first text part, the reminder comes after them",
			[]WireMessage{u("P"), {Role: RoleUser, Parts: []ContentPart{{Text: "what is this?"}, img}}, u("R")},
			[]WireMessage{{Role: RoleUser, Parts: []ContentPart{{Text: "P\n\nwhat is this?"}, img, {Text: "R"}}}}},
		{"an image without words",
			[]WireMessage{u("P"), {Role: RoleUser, Parts: []ContentPart{{Text: ""}, img}}},
			[]WireMessage{{Role: RoleUser, Parts: []ContentPart{{Text: "P"}, img}}}},
		{"tool results then the reminder",
			[]WireMessage{u("P\n\nhi"), {Role: RoleAssistant, ToolCalls: call}, {Role: RoleTool, ToolCallID: "c1", Content: "r"}, u("R")},
			[]WireMessage{u("P\n\nhi"), {Role: RoleAssistant, ToolCalls: call}, {Role: RoleTool, ToolCallID: "c1", Content: "r"}, u("R")}},
		{"two answers", []WireMessage{u("hi"), a("one"), a("two")}, []WireMessage{u("hi"), a("one\n\ntwo")}},
		{"an answer then a tool call",
			[]WireMessage{u("hi"), a("let me look"), {Role: RoleAssistant, ToolCalls: call}, {Role: RoleTool, ToolCallID: "c1"}, a("done")},
			[]WireMessage{u("hi"), {Role: RoleAssistant, Content: "let me look", ToolCalls: call}, {Role: RoleTool, ToolCallID: "c1"}, a("done")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]WireMessage(nil), tc.in...)
			snapshot := deepCopy(in)
			if got := alternate(in); !reflect.DeepEqual(got, tc.out) {
				t.Errorf("alternate =\n %+v\nwant\n %+v", got, tc.out)
			}
			if !reflect.DeepEqual(in, snapshot) {
				t.Errorf("alternate changed its input: %+v", in)
			}
		})
	}
}

func deepCopy(msgs []WireMessage) []WireMessage {
	out := make([]WireMessage, len(msgs))
	for i, m := range msgs {
		m.Parts = append([]ContentPart(nil), m.Parts...)
		m.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
		if len(m.Parts) == 0 {
			m.Parts = msgs[i].Parts
		}
		if len(m.ToolCalls) == 0 {
			m.ToolCalls = msgs[i].ToolCalls
		}
		out[i] = m
	}
	return out
}
