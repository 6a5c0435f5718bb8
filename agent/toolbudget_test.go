package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"koe/agent"
	"koe/testkit/fakellm"
)

// manyBox offers n tools of the source "MCP server many" after two of
// koe's own, each described in desc.
type manyBox struct {
	n    int
	desc string
}

func (b manyBox) Specs() []agent.ToolSpec {
	specs := []agent.ToolSpec{{Name: "own_a", Description: "Mine."}, {Name: "own_b", Description: "Mine too."}}
	for i := range b.n {
		specs = append(specs, agent.ToolSpec{Name: fmt.Sprintf("many__t%03d", i), Description: b.desc, Source: "MCP server many"})
	}
	return specs
}

func (manyBox) Call(context.Context, agent.ToolCall) (string, error) { return "", nil }

// Over llm.max_tools the first tools the box lists are sent, and what was
// left out is logged once, not every turn.
func TestMaxToolsPerRequest(t *testing.T) {
	var logs bytes.Buffer
	a, s := toolAgent(t, manyBox{n: 10, desc: "One of many."}, func(o *agent.Options) {
		o.MaxTools = 5
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	}, fakellm.Reply{Tokens: []string{"One."}}, fakellm.Reply{Tokens: []string{"Two."}})
	for _, text := range []string{"first", "second"} {
		a.AddUser(text)
		if err := a.Reply(testCtx(t), &tokens{}); err != nil {
			t.Fatal(err)
		}
		a.AddAssistant(text+" answered", false)
	}
	for i, r := range chatRequests(s) {
		if want := []string{"own_a", "own_b", "many__t000", "many__t001", "many__t002"}; !slices.Equal(r.Tools, want) {
			t.Errorf("request %d offers %q, want %q", i, r.Tools, want)
		}
	}
	if n := strings.Count(logs.String(), "tools left out"); n != 1 {
		t.Errorf("logged %d times:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `left_out=7 from="MCP server many: 7"`) || !strings.Contains(logs.String(), "many__t009") {
		t.Errorf("the log does not say what was left out:\n%s", logs.String())
	}
}

// Tools that alone overflow the window are named with what they take;
// a message too long with no tool to blame is the plain error.
func TestToolsTooLarge(t *testing.T) {
	desc := strings.Repeat("A long description of a tool that takes room. ", 20)
	a, s := toolAgent(t, manyBox{n: 60, desc: desc}, func(o *agent.Options) { o.ContextWindow = 4096 })
	a.AddUser("hello")
	err := a.Reply(testCtx(t), &tokens{})
	var tooLarge *agent.ToolsTooLargeError
	if !errors.As(err, &tooLarge) || !errors.Is(err, agent.ErrContextTooLarge) {
		t.Fatalf("err = %v", err)
	}
	if len(tooLarge.Groups) != 2 || tooLarge.Groups[0].Source != "MCP server many" || tooLarge.Groups[0].Tools != 60 || tooLarge.Groups[1].Tools != 2 {
		t.Errorf("groups %+v", tooLarge.Groups)
	}
	sum := 0
	for _, g := range tooLarge.Groups {
		sum += g.Tokens
	}
	if sum >= tooLarge.Tokens || tooLarge.Tokens-sum > 20 || tooLarge.Room <= 0 || tooLarge.Room >= 4096 || tooLarge.Window != 4096 {
		t.Errorf("tokens %d (groups %d), room %d, window %d", tooLarge.Tokens, sum, tooLarge.Room, tooLarge.Window)
	}
	msg := err.Error()
	for _, part := range []string{"MCP server many: ", "tokens for 60 tools", "koe's own tools: ", "for 2 tools", "llm.context_window", "llm.max_tools", "tools.mcp_servers", "mcp_max_description_chars"} {
		if !strings.Contains(msg, part) {
			t.Errorf("%q is not in %q", part, msg)
		}
	}
	if n := len(chatRequests(s)); n != 0 {
		t.Errorf("%d requests sent", n)
	}

	b, _ := toolAgent(t, manyBox{n: 1, desc: "Small."}, func(o *agent.Options) { o.ContextWindow = 1024 })
	b.AddUser(strings.Repeat("a very long message ", 400))
	err = b.Reply(testCtx(t), &tokens{})
	if !errors.Is(err, agent.ErrContextTooLarge) || errors.As(err, &tooLarge) {
		t.Errorf("a long message with small tools: %v", err)
	}
}
