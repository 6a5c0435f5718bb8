package mcp

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/agent"
)

// recordingAsker answers every question with its answer, and keeps them.
type recordingAsker struct {
	mu     sync.Mutex
	asked  []agent.Question
	answer agent.Answer
}

func (a *recordingAsker) Ask(_ context.Context, q agent.Question) agent.Answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, q)
	return a.answer
}

func colorRequest() *sdk.ElicitRequest {
	return &sdk.ElicitRequest{Params: &sdk.ElicitParams{Message: "Which color?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"color": map[string]any{"type": "string", "enum": []string{"red", "blue"}}},
	}}}
}

// A question sent while calls run (older protocols) goes to the one
// conversation whose calls are under way; with none, or with calls of
// two conversations, koe cannot tell whose it is and declines. One asked
// with a call's own context (multi round-trip) goes to that call's.
func TestElicitationFindsItsConversation(t *testing.T) {
	s := &server{name: "srv", log: slog.New(slog.DiscardHandler), limits: Config{}.limits()}
	ctx := context.Background()
	if res, _ := s.elicit(ctx, colorRequest()); res.Action != agent.Decline {
		t.Fatalf("with no call under way: %s", res.Action)
	}

	one := &recordingAsker{answer: agent.Answer{Action: agent.Accept, Content: map[string]any{"color": "blue"}}}
	call := agent.ToolCall{ID: "call_7", Name: "srv__paint"}
	end := s.asking.during(agent.WithAsker(ctx, one), call, "MCP server srv")
	end2 := s.asking.during(agent.WithAsker(ctx, one), agent.ToolCall{ID: "call_8", Name: "srv__paint"}, "MCP server srv")
	res, err := s.elicit(ctx, colorRequest())
	if err != nil || res.Action != agent.Accept || res.Content["color"] != "blue" {
		t.Fatalf("one conversation's calls: %+v %v", res, err)
	}
	if q := one.asked[0]; q.Kind != agent.AskElicit || q.Text != "Which color? (color (red, blue))" || q.Source != "MCP server srv" {
		t.Fatalf("the question: %+v", q)
	}

	other := &recordingAsker{answer: agent.Answer{Action: agent.Accept}}
	end3 := s.asking.during(agent.WithAsker(ctx, other), call, "MCP server srv")
	if res, _ := s.elicit(ctx, colorRequest()); res.Action != agent.Decline || len(other.asked) != 0 || len(one.asked) != 1 {
		t.Fatalf("two conversations' calls: %s", res.Action)
	}
	// Its own call's context says whose it is.
	own := context.WithValue(agent.WithAsker(ctx, other), callKey{}, call)
	if res, _ := s.elicit(own, colorRequest()); res.Action != agent.Accept || len(other.asked) != 1 || other.asked[0].Call != call {
		t.Fatalf("asked with the call's context: %s, %+v", res.Action, other.asked)
	}
	end()
	end2()
	end3()
	if res, _ := s.elicit(ctx, colorRequest()); res.Action != agent.Decline {
		t.Fatalf("after the calls: %s", res.Action)
	}
}

// Tools that say they change things ask first; read-only ones and those
// that say nothing do not.
func TestChangesThings(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		a    *sdk.ToolAnnotations
		want bool
	}{
		{nil, false},
		{&sdk.ToolAnnotations{ReadOnlyHint: true}, false},
		{&sdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}, false},
		{&sdk.ToolAnnotations{DestructiveHint: &yes}, true},
		{&sdk.ToolAnnotations{DestructiveHint: &no}, true}, // additive: still not read-only
		{&sdk.ToolAnnotations{Title: "x"}, true},
	} {
		if got := changesThings(tc.a); got != tc.want {
			t.Errorf("%+v: %v", tc.a, got)
		}
	}
}
