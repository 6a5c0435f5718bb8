// Package tools holds koe's built-in tools: the functions a character's
// model may call during a turn. The agent loop asks a Box for the specs it
// sends with a request and runs the calls the model makes through it.
package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"koe/agent"
)

// Defaults and floors of the limits in Options.
const (
	DefaultMaxResultChars = 16000
	// minResultChars leaves room for the cut note and some of the result.
	minResultChars = 200
	// maxErrorChars bounds a tool error: the model needs the reason, not
	// a copy of a long argument.
	maxErrorChars = 300
)

// Options tune the built-in tools. The zero value is usable for the
// tools that need no settings; the others say which key they miss.
type Options struct {
	// Now is the clock of get_current_datetime (nil: time.Now).
	Now func() time.Time
	// MaxResultChars bounds a result's length in characters, the note
	// included (0: DefaultMaxResultChars); longer results are cut with a
	// note saying so.
	MaxResultChars int
	// CalculatorMaxChars bounds the length of a calculator expression
	// (0: DefaultCalculatorMaxChars).
	CalculatorMaxChars int
	// CalculatorMaxNodes bounds the parts (numbers, operators, calls) of a
	// calculator expression (0: DefaultCalculatorMaxNodes).
	CalculatorMaxNodes int
	// Python configures the python tool.
	Python PythonSettings
	// MaxDocumentChars bounds the contents of each document a search
	// tool returns (0: DefaultMaxDocumentChars).
	MaxDocumentChars int

	// The settings of the tools that have some, as in Config; a tool's
	// are checked when it is enabled, and errors name their keys.
	HTTP      HTTPSettings
	Weather   WeatherSettings
	Wikipedia WikipediaSettings
	WebSearch WebSearchSettings
	Files     FilesSettings

	// HTTPClient makes the web tools' requests (nil: a client shared by
	// every such box, with connect and header timeouts). The call's ctx
	// bounds and cancels each request.
	HTTPClient *http.Client
	// Getenv reads the environment variables that hold API keys (nil:
	// os.Getenv).
	Getenv func(string) string
}

// Box is the set of tools one character may use. It does not change after
// New, so one Box may run many calls at once.
type Box struct {
	tools          []tool
	maxResultChars int
}

// tool is one built-in tool as a Box holds it.
type tool struct {
	spec agent.ToolSpec
	// run gets the arguments as the model wrote them (JSON) and returns
	// the result for the model, or an error safe to show it.
	run func(ctx context.Context, args string) (string, error)
}

func agentSpec(name, description string, args objectSchema) agent.ToolSpec {
	return agent.ToolSpec{Name: name, Description: description, Parameters: args.json()}
}

// builtin is a tool koe knows, built for a Box from its Options. build
// fails on settings the tool cannot work with, naming their keys.
type builtin struct {
	name  string
	build func(Options) (tool, error)
	// search tools return documents the model may cite.
	search bool
}

// builtins in the order Names lists them.
var builtins = []builtin{
	{name: calculatorName, build: infallible(newCalculator)},
	{name: datetimeName, build: infallible(newDatetime)},
	{name: weatherName, build: newWeather},
	{name: wikipediaName, build: newWikipedia, search: true},
	{name: webSearchName, build: newWebSearch, search: true},
	{name: readFileName, build: newReadFile},
	{name: pythonName, build: newPython},
}

func infallible(build func(Options) tool) func(Options) (tool, error) {
	return func(o Options) (tool, error) { return build(o), nil }
}

// IsSearch reports whether the built-in tool called name is a search
// tool: its results are the documents JSON, which the model should cite
// by number.
func IsSearch(name string) bool {
	i := slices.IndexFunc(builtins, func(b builtin) bool { return b.name == name })
	return i >= 0 && builtins[i].search
}

// Names lists the built-in tool names koe knows (for config validation
// and docs).
func Names() []string {
	names := make([]string, len(builtins))
	for i, b := range builtins {
		names[i] = b.name
	}
	return names
}

// New builds the box of the enabled built-in tool names (config key
// tools.enabled), in the order given. An unknown or repeated name is an
// error naming it; an unknown one also lists the known ones.
func New(enabled []string, opts Options) (*Box, error) {
	if err := checkNames(enabled); err != nil {
		return nil, err
	}
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	b := &Box{maxResultChars: opts.MaxResultChars}
	for _, name := range enabled {
		j := slices.IndexFunc(builtins, func(b builtin) bool { return b.name == name })
		t, err := builtins[j].build(opts)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", name, err)
		}
		b.tools = append(b.tools, t)
	}
	return b, nil
}

// checkNames refuses an unknown or repeated tool name.
func checkNames(enabled []string) error {
	for i, name := range enabled {
		if slices.Contains(enabled[:i], name) {
			return fmt.Errorf("tool %q is enabled twice", name)
		}
		if !slices.ContainsFunc(builtins, func(b builtin) bool { return b.name == name }) {
			return fmt.Errorf("unknown tool %q (the built-in tools are %s)", name, strings.Join(Names(), ", "))
		}
	}
	return nil
}

func (o Options) check() error {
	if o.MaxResultChars < 0 || o.MaxResultChars > 0 && o.MaxResultChars < minResultChars {
		return fmt.Errorf("MaxResultChars is %d: it must be 0 (%d) or at least %d", o.MaxResultChars, DefaultMaxResultChars, minResultChars)
	}
	if o.CalculatorMaxChars < 0 {
		return fmt.Errorf("CalculatorMaxChars is %d: it must be 0 (%d) or more", o.CalculatorMaxChars, DefaultCalculatorMaxChars)
	}
	if err := o.Python.check(); err != nil {
		return err
	}
	if o.CalculatorMaxNodes < 0 {
		return fmt.Errorf("CalculatorMaxNodes is %d: it must be 0 (%d) or more", o.CalculatorMaxNodes, DefaultCalculatorMaxNodes)
	}
	if o.MaxDocumentChars < 0 || o.MaxDocumentChars > 0 && o.MaxDocumentChars < minDocumentChars {
		return fmt.Errorf("MaxDocumentChars is %d: it must be 0 (%d) or at least %d", o.MaxDocumentChars, DefaultMaxDocumentChars, minDocumentChars)
	}
	return o.HTTP.check()
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxResultChars == 0 {
		o.MaxResultChars = DefaultMaxResultChars
	}
	if o.CalculatorMaxChars == 0 {
		o.CalculatorMaxChars = DefaultCalculatorMaxChars
	}
	if o.CalculatorMaxNodes == 0 {
		o.CalculatorMaxNodes = DefaultCalculatorMaxNodes
	}
	if o.MaxDocumentChars == 0 {
		o.MaxDocumentChars = DefaultMaxDocumentChars
	}
	o.HTTP = o.HTTP.withDefaults()
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	return o
}

// Specs lists the tools, for the LLM request (name, description, JSON
// schema of the arguments). The caller owns the slice and its contents.
func (b *Box) Specs() []agent.ToolSpec {
	if b == nil {
		return nil
	}
	specs := make([]agent.ToolSpec, len(b.tools))
	for i, t := range b.tools {
		specs[i] = t.spec
		specs[i].Parameters = slices.Clone(t.spec.Parameters)
	}
	return specs
}

// Call runs one call. A tool failure (bad arguments, unknown tool, a
// failed computation, a cancelled ctx) is an error whose message is short,
// human-readable and safe to show the model; a cancelled ctx's error
// stays reachable with errors.Is.
func (b *Box) Call(ctx context.Context, call agent.ToolCall) (result string, err error) {
	// A tool bug must cost one call, not the server: calls run on the
	// loop's goroutines, where a panic would end the process.
	defer func() {
		if r := recover(); r != nil {
			slog.Error("tools: tool panicked", "tool", call.Name, "panic", r, "stack", string(debug.Stack()))
			result, err = "", errors.New("the tool failed with an internal error")
		}
	}()
	if err := ctx.Err(); err != nil {
		return "", ctxError(err)
	}
	t, ok := b.find(call.Name)
	if !ok {
		return "", b.unknownTool(call.Name)
	}
	out, err := t.run(ctx, call.Arguments)
	if err != nil {
		return "", shortError(err)
	}
	return cut(out, b.maxResultChars), nil
}

func (b *Box) find(name string) (tool, bool) {
	if b != nil {
		for _, t := range b.tools {
			if t.spec.Name == name {
				return t, true
			}
		}
	}
	return tool{}, false
}

func (b *Box) unknownTool(name string) error {
	var names []string
	if b != nil {
		for _, t := range b.tools {
			names = append(names, t.spec.Name)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("unknown tool %q: no tools are available", clip(name))
	}
	return fmt.Errorf("unknown tool %q (available: %s)", clip(name), strings.Join(names, ", "))
}

// toolError is a tool failure with a message of its own for the model and
// the cause kept for errors.Is.
type toolError struct {
	msg   string
	cause error
}

func (e *toolError) Error() string { return e.msg }
func (e *toolError) Unwrap() error { return e.cause }

func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &toolError{msg: "the tool call timed out", cause: err}
	}
	return &toolError{msg: "the tool call was cancelled", cause: err}
}

// shortError bounds err's message to maxErrorChars.
func shortError(err error) error {
	msg := err.Error()
	if utf8.RuneCountInString(msg) <= maxErrorChars {
		return err
	}
	return &toolError{msg: string([]rune(msg)[:maxErrorChars-1]) + "…", cause: err}
}

// CutResult bounds a tool's result to limit characters (0:
// DefaultMaxResultChars) as the built-in tools' are, a note saying so
// included: a client's own tool's result, say.
func CutResult(s string, limit int) string {
	if limit <= 0 {
		limit = DefaultMaxResultChars
	}
	return cut(s, max(limit, minResultChars))
}

// cut bounds s to limit characters, the note that says so included.
func cut(s string, limit int) string {
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s
	}
	// The note's length depends on the kept count only through its digits,
	// which the total's digits bound.
	note := func(kept int) string {
		return fmt.Sprintf("\n[result cut: the first %d of %d characters are shown]", kept, n)
	}
	kept := limit - utf8.RuneCountInString(note(n))
	return string([]rune(s)[:kept]) + note(kept)
}

// clip shortens a value the model wrote before it is quoted in an error.
func clip(s string) string { return clipTo(s, 60) }

// clipTo bounds s to limit characters, an ellipsis included.
func clipTo(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return string([]rune(s)[:limit-1]) + "…"
}

// IsSearch reports whether the box's tool called name is a search tool,
// so that the agent loop asks the model to cite its documents.
func (b *Box) IsSearch(name string) bool {
	_, ok := b.find(name)
	return ok && IsSearch(name)
}
