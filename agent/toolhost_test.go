package agent_test

import (
	"context"
	"strings"
	"testing"

	"koe/agent"
	"koe/testkit/fakellm"
)

// hostBox's one tool, shot, uses its call's ToolHost: it reports progress
// and a step of its own, and returns a picture with its text.
type hostBox struct{}

func (hostBox) Specs() []agent.ToolSpec {
	return []agent.ToolSpec{{Name: "shot", Description: "Takes a picture."}}
}

func (hostBox) Call(ctx context.Context, c agent.ToolCall) (string, error) {
	h := agent.ToolHostOf(ctx)
	if h == nil || h.Call.ID != c.ID || h.LLM == nil {
		return "", nil
	}
	h.Progress("halfway")
	h.Status("step:1", "start", "a step of shot", "")
	h.AddImages(agent.Image{Source: "tool", MimeType: "image/png", Data: "iVBORw0KGgo="})
	return "a picture", nil
}

// hostEvents records tool events, progress and steps, in order.
type hostEvents struct{ toolEvents }

func (e *hostEvents) ToolProgress(c agent.ToolCall, text string) {
	e.note("progress " + c.ID + ": " + text)
}

func (e *hostEvents) Status(task, state, text, _ string) {
	e.note("status " + task + " " + state + ": " + text)
}

// A tool's progress and steps reach the turn's emitter between its start
// and its end; the pictures it returns reach a model that sees images as
// image parts after the cycle's results, in that turn only.
func TestToolHost(t *testing.T) {
	a, s := toolAgent(t, hostBox{}, func(o *agent.Options) { o.Vision = true },
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "shot", Arguments: `{}`}}},
		fakellm.Reply{Tokens: []string{"A cat."}},
		fakellm.Reply{Tokens: []string{"Yes."}},
	)
	s.SetStrictRoles(true)
	a.AddUser("what do you see?")
	em := &hostEvents{toolEvents: *newToolEvents()}
	if err := a.Reply(testCtx(t), em); err != nil {
		t.Fatal(err)
	}
	a.AddAssistant("A cat.", false)
	want := []string{"called 1", "start c1", "progress c1: halfway", "status step:1 start: a step of shot", "done c1: a picture"}
	if got := em.list(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
	m := chatRequests(s)[1].Messages
	i := len(m) - 1
	for i > 0 && m[i].Role != "tool" {
		i--
	}
	if m[i].Content != "a picture" || i+1 >= len(m) {
		t.Fatalf("the result went back as %+v, the last of %d", m[i], len(m))
	}
	if next := m[i+1]; next.Role != "user" || next.Images != 1 || !strings.Contains(next.Content, "Images returned by the tool shot") {
		t.Errorf("after the result: %+v, want a user message with the picture", next)
	}

	a.AddUser("sure?")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	for _, msg := range chatRequests(s)[2].Messages {
		if msg.Images > 0 {
			t.Errorf("the next turn sent the picture again: %+v", msg)
		}
	}
}

// A model that does not see images gets none of a tool's pictures.
func TestToolHostNoVision(t *testing.T) {
	a, s := toolAgent(t, hostBox{}, nil,
		fakellm.Reply{ToolCalls: []fakellm.ToolCall{{ID: "c1", Name: "shot", Arguments: `{}`}}},
		fakellm.Reply{Tokens: []string{"Done."}},
	)
	a.AddUser("take one")
	if err := a.Reply(testCtx(t), &tokens{}); err != nil {
		t.Fatal(err)
	}
	for _, msg := range chatRequests(s)[1].Messages {
		if msg.Images > 0 {
			t.Errorf("a model without vision was sent %+v", msg)
		}
	}
}
