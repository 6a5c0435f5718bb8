package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// ToolPolicy is what a character says of its tools by name (the names
// the model sees, `*` matching any run of characters): Deny is never
// offered, Confirm and tools that change things wait for the user's yes,
// Allow runs without asking.
type ToolPolicy struct {
	Allow, Deny, Confirm []string
}

// CheckPatterns reports a malformed name pattern, for config validation.
func CheckPatterns(key string, patterns []string) error {
	for _, p := range patterns {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("%s: an empty tool name", key)
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%s: %q is not a name pattern: %w", key, p, err)
		}
	}
	return nil
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// asks reports whether a call of spec waits for the user's yes.
func (p ToolPolicy) asks(spec ToolSpec) bool {
	return (spec.Changes || matchAny(p.Confirm, spec.Name)) && !matchAny(p.Allow, spec.Name)
}

// Guard applies p to box. A denied tool is neither offered nor run, even
// when the model names it anyway; a tool that asks runs only after the
// user's yes, put to them through the call's Asker: with nobody to ask
// (the chat API, the live chat) it does not run.
func Guard(box Toolbox, p ToolPolicy) Toolbox {
	if box == nil {
		return nil
	}
	return &guarded{box: box, p: p}
}

type guarded struct {
	box Toolbox
	p   ToolPolicy
}

func (g *guarded) Specs() []ToolSpec {
	specs := g.box.Specs()
	out := specs[:0]
	for _, s := range specs {
		if !matchAny(g.p.Deny, s.Name) {
			out = append(out, s)
		}
	}
	return out
}

func (g *guarded) IsSearch(name string) bool {
	s, ok := g.box.(Searcher)
	return ok && s.IsSearch(name)
}

func (g *guarded) Call(ctx context.Context, c ToolCall) (string, error) {
	if matchAny(g.p.Deny, c.Name) {
		return "", fmt.Errorf("the tool %q is not allowed for this character (tools.deny)", c.Name)
	}
	var spec ToolSpec
	for _, s := range g.box.Specs() {
		if s.Name == c.Name {
			spec = s
			break
		}
	}
	if spec.Name != "" && g.p.asks(spec) {
		if err := confirm(ctx, spec, c); err != nil {
			return "", err
		}
	}
	return g.box.Call(ctx, c)
}

// confirm asks the user whether c may run.
func confirm(ctx context.Context, spec ToolSpec, c ToolCall) error {
	asker := AskerFrom(ctx)
	if asker == nil {
		return fmt.Errorf("%w: it needs the user's yes, and nobody can be asked here", ErrNotConfirmed)
	}
	text, speech := confirmQuestion(spec, c)
	ans := asker.Ask(ctx, Question{Kind: AskConfirm, Text: text, Speech: speech, Call: c, Source: spec.Source, Options: []string{"Yes", "No"}})
	switch {
	case ans.Unasked:
		return fmt.Errorf("%w: it needs the user's yes, and nobody can be asked here%s", ErrNotConfirmed, because(ans.Reason))
	case ans.Action == Accept:
		return nil
	case ans.Action == Cancel:
		return fmt.Errorf("%w: the user cancelled; it did not run%s", ErrNotConfirmed, because(ans.Reason))
	}
	return fmt.Errorf("%w: the user said no; it did not run%s", ErrNotConfirmed, because(ans.Reason))
}

func because(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// confirmQuestion words a confirmation: the tool and its arguments in
// text, the tool alone in speech (JSON is not read aloud).
func confirmQuestion(spec ToolSpec, c ToolCall) (text, speech string) {
	what := humanTool(c.Name)
	args := strings.TrimSpace(c.Arguments)
	var compact struct{ json.RawMessage }
	if json.Unmarshal([]byte(args), &compact.RawMessage) == nil && len(compact.RawMessage) > 0 && args != "{}" {
		text = fmt.Sprintf("May I run %s with %s? Yes or no?", c.Name, clipArgs(args))
	} else {
		text = fmt.Sprintf("May I run %s? Yes or no?", c.Name)
	}
	if spec.Source != "" {
		what += " from " + strings.TrimPrefix(spec.Source, "MCP server ")
	}
	return text, "May I run " + what + "? Please say yes or no."
}

// humanTool reads a tool's name aloud: "files__delete_file" is "delete
// file".
func humanTool(name string) string {
	if _, tool, ok := strings.Cut(name, "__"); ok {
		name = tool
	}
	return strings.TrimSpace(strings.NewReplacer("_", " ", "-", " ").Replace(name))
}

func clipArgs(s string) string {
	if r := []rune(s); len(r) > 300 {
		return string(r[:299]) + "…"
	}
	return s
}
