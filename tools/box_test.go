package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"koe/agent"
)

func TestNames(t *testing.T) {
	want := []string{"calculator", "get_current_datetime", "get_weather", "search_wikipedia", "web_search", "read_file", "python"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	// The caller owns the slice.
	Names()[0] = "changed"
	if Names()[0] != "calculator" {
		t.Fatal("Names shares its slice")
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		enabled   []string
		opts      Options
		wantNames []string
		wantErr   string
	}{
		{enabled: nil, wantNames: nil},
		{enabled: []string{"calculator"}, wantNames: []string{"calculator"}},
		// The order given is the order of Specs.
		{enabled: []string{"get_current_datetime", "calculator"}, wantNames: []string{"get_current_datetime", "calculator"}},
		{enabled: []string{"calculator", "web_browser"},
			wantErr: `unknown tool "web_browser" (the built-in tools are calculator, get_current_datetime, get_weather, search_wikipedia, web_search, read_file, python)`},
		{enabled: []string{""}, wantErr: `unknown tool ""`},
		{enabled: []string{"Calculator"}, wantErr: `unknown tool "Calculator"`},
		{enabled: []string{"calculator", "get_current_datetime", "calculator"}, wantErr: `tool "calculator" is enabled twice`},
		{opts: Options{MaxResultChars: -1}, wantErr: "MaxResultChars is -1: it must be 0 (16000) or at least 200"},
		{opts: Options{MaxResultChars: 199}, wantErr: "MaxResultChars is 199"},
		{opts: Options{MaxResultChars: 200}},
		{opts: Options{CalculatorMaxChars: -5}, wantErr: "CalculatorMaxChars is -5"},
		{opts: Options{CalculatorMaxNodes: -1}, wantErr: "CalculatorMaxNodes is -1"},
	}
	for _, tt := range tests {
		b, err := New(tt.enabled, tt.opts)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New(%q, %+v) = %v, want an error containing %q", tt.enabled, tt.opts, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q, %+v): %v", tt.enabled, tt.opts, err)
			continue
		}
		var names []string
		for _, s := range b.Specs() {
			names = append(names, s.Name)
		}
		if !slices.Equal(names, tt.wantNames) {
			t.Errorf("New(%q): specs %v, want %v", tt.enabled, names, tt.wantNames)
		}
	}
}

// Every spec is what an OpenAI-compatible server takes as a function's
// parameters, and every spec's name reaches its tool.
func TestSpecs(t *testing.T) {
	b := newBox(t, Names(), everyToolOptions(t))
	specs := b.Specs()
	if len(specs) != len(Names()) {
		t.Fatalf("%d specs for %d tools", len(specs), len(Names()))
	}
	for _, s := range specs {
		if s.Name == "" || len(s.Description) < 20 {
			t.Errorf("%q: name or description missing: %q", s.Name, s.Description)
		}
		var schema struct {
			Type       string `json:"type"`
			Properties map[string]struct {
				Type        string `json:"type"`
				Description string `json:"description"`
				Minimum     *int   `json:"minimum"`
				Maximum     *int   `json:"maximum"`
			} `json:"properties"`
			Required             []string `json:"required"`
			AdditionalProperties *bool    `json:"additionalProperties"`
		}
		dec := json.NewDecoder(strings.NewReader(string(s.Parameters)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&schema); err != nil {
			t.Errorf("%s: parameters are not a schema of the expected shape: %v\n%s", s.Name, err, s.Parameters)
			continue
		}
		if schema.Type != "object" || schema.Properties == nil || schema.Required == nil ||
			schema.AdditionalProperties == nil || *schema.AdditionalProperties {
			t.Errorf("%s: want an object schema with properties, required and additionalProperties false: %s", s.Name, s.Parameters)
		}
		for name, p := range schema.Properties {
			if !slices.Contains([]string{"string", "number", "integer", "boolean"}, p.Type) || p.Description == "" {
				t.Errorf("%s.%s: type %q, description %q", s.Name, name, p.Type, p.Description)
			}
			if (p.Minimum != nil || p.Maximum != nil) && p.Type != "integer" ||
				p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
				t.Errorf("%s.%s: bounds %v..%v on a %s", s.Name, name, p.Minimum, p.Maximum, p.Type)
			}
		}
		for _, r := range schema.Required {
			if _, ok := schema.Properties[r]; !ok {
				t.Errorf("%s: required %q is not a property", s.Name, r)
			}
		}
		_, err := b.Call(context.Background(), agent.ToolCall{ID: "1", Name: s.Name, Arguments: "{}"})
		if err != nil && strings.HasPrefix(err.Error(), "unknown tool") {
			t.Errorf("%s is listed but not callable: %v", s.Name, err)
		}
	}
	// The caller may change what it got without changing the box.
	specs[0].Parameters[0] = 'X'
	specs[0].Name = "changed"
	if again := b.Specs(); again[0].Parameters[0] != '{' || again[0].Name != "calculator" {
		t.Fatal("Specs shares its contents with the box")
	}
}

func TestCallUnknownTool(t *testing.T) {
	b := newBox(t, []string{"calculator"}, Options{})
	_, err := b.Call(context.Background(), agent.ToolCall{Name: "get_current_datetime"})
	want := `unknown tool "get_current_datetime" (available: calculator)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	empty := newBox(t, nil, Options{})
	if _, err := empty.Call(context.Background(), agent.ToolCall{Name: "calculator"}); err == nil ||
		err.Error() != `unknown tool "calculator": no tools are available` {
		t.Fatalf("empty box: got %v", err)
	}
	var none *Box
	if _, err := none.Call(context.Background(), agent.ToolCall{Name: "calculator"}); err == nil {
		t.Fatal("nil box: no error")
	}
	if none.Specs() != nil {
		t.Fatal("nil box has specs")
	}
}

func TestCallContext(t *testing.T) {
	b := newBox(t, Names(), everyToolOptions(t))
	call := agent.ToolCall{Name: "calculator", Arguments: `{"expression":"1+1"}`}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Call(ctx, call)
	if err == nil || err.Error() != "the tool call was cancelled" || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}

	ctx, cancel = context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	_, err = b.Call(ctx, call)
	if err == nil || err.Error() != "the tool call timed out" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: got %v", err)
	}
}

// The built-in results are short; a tool of the test's own shows the cut
// a long result gets.
func TestCallCutsLongResults(t *testing.T) {
	b := newBox(t, nil, Options{MaxResultChars: 200})
	long := strings.Repeat("é", 500)
	b.tools = append(b.tools, tool{
		spec: agent.ToolSpec{Name: "long"},
		run:  func(context.Context, string) (string, error) { return long, nil },
	})
	got, err := b.Call(context.Background(), agent.ToolCall{Name: "long"})
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(got); n > 200 || n < 190 {
		t.Errorf("cut result has %d characters, want at most 200 and close to it", n)
	}
	if !utf8.ValidString(got) {
		t.Error("cut result is not valid UTF-8")
	}
	kept := strings.Count(got, "é")
	if want := fmt.Sprintf("\n[result cut: the first %d of 500 characters are shown]", kept); !strings.HasSuffix(got, want) {
		t.Errorf("cut result ends %q, want %q", got[len(got)-60:], want)
	}
}

func TestCut(t *testing.T) {
	for _, tt := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 200, "short"},
		{strings.Repeat("a", 200), 200, strings.Repeat("a", 200)},
		{strings.Repeat("a", 201), 200, strings.Repeat("a", 144) + "\n[result cut: the first 144 of 201 characters are shown]"},
		{strings.Repeat("日", 20000), 16000, strings.Repeat("日", 15940) + "\n[result cut: the first 15940 of 20000 characters are shown]"},
	} {
		got := cut(tt.in, tt.limit)
		if got != tt.want {
			t.Errorf("cut(%d chars, %d) = %q…, want %q…", len(tt.in), tt.limit, clip(got), clip(tt.want))
		}
		if n := utf8.RuneCountInString(got); n > tt.limit {
			t.Errorf("cut(%d chars, %d) has %d characters", len(tt.in), tt.limit, n)
		}
	}
}

func TestCallShortensLongErrors(t *testing.T) {
	b := newBox(t, nil, Options{})
	cause := errors.New(strings.Repeat("ø", 1000))
	b.tools = append(b.tools, tool{
		spec: agent.ToolSpec{Name: "chatty"},
		run:  func(context.Context, string) (string, error) { return "", cause },
	})
	_, err := b.Call(context.Background(), agent.ToolCall{Name: "chatty"})
	if err == nil || utf8.RuneCountInString(err.Error()) != maxErrorChars || !strings.HasSuffix(err.Error(), "ø…") {
		t.Fatalf("got %v", err)
	}
	if !errors.Is(err, cause) {
		t.Fatal("the shortened error lost its cause")
	}
}

func TestCallRecoversFromAPanickingTool(t *testing.T) {
	b := newBox(t, nil, Options{})
	b.tools = append(b.tools, tool{
		spec: agent.ToolSpec{Name: "broken"},
		run:  func(context.Context, string) (string, error) { panic("bug") },
	})
	var log bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	_, err := b.Call(context.Background(), agent.ToolCall{Name: "broken"})
	if err == nil || err.Error() != "the tool failed with an internal error" {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(log.String(), "tool=broken panic=bug") {
		t.Fatalf("the panic was not logged: %s", log.String())
	}
}

// One box serves every call of a character at once (run with -race).
func TestConcurrentCalls(t *testing.T) {
	clock := func() time.Time { return time.Date(2026, 11, 23, 13, 5, 9, 0, time.UTC) }
	opts := everyToolOptions(t)
	opts.Now = clock
	b := newBox(t, Names(), opts)
	calls := []struct {
		call agent.ToolCall
		want string
	}{
		{agent.ToolCall{Name: "calculator", Arguments: `{"expression":"6*7"}`}, "42"},
		{agent.ToolCall{Name: "calculator", Arguments: `{"expression":"sqrt(16) + max(1, 2)"}`}, "6"},
		{agent.ToolCall{Name: "get_current_datetime", Arguments: `{"timezone":"Europe/Berlin"}`},
			"Monday, 23 November 2026, 14:05:09 CET (Europe/Berlin, UTC+01:00)"},
		{agent.ToolCall{Name: "read_file", Arguments: `{"path":"."}`}, "[the shared folder is empty]"},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(calls))
	for range 8 {
		for _, c := range calls {
			wg.Go(func() {
				got, err := b.Call(context.Background(), c.call)
				if err != nil || got != c.want {
					errs <- fmt.Errorf("%s(%s) = %q, %v; want %q", c.call.Name, c.call.Arguments, got, err, c.want)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// everyToolOptions are settings every built-in tool can be built with,
// for tests of the box as a whole; the web tools' requests fail without
// leaving the machine.
func everyToolOptions(t *testing.T) Options {
	return Options{
		HTTPClient: &http.Client{Transport: refuseAll{}},
		WebSearch:  WebSearchSettings{Provider: ProviderSearXNG, BaseURL: "http://search.invalid"},
		Files:      FilesSettings{Root: t.TempDir()},
		// A sandboxed python is probed (bwrap, python3) when the box is
		// made; the short lane runs no outside program, and these tests
		// only read the tools' specs.
		Python: PythonSettings{Unsandboxed: testing.Short()},
	}
}

func newBox(t *testing.T, enabled []string, opts Options) *Box {
	t.Helper()
	b, err := New(enabled, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The box tells the agent which of its tools search.
func TestBoxIsSearch(t *testing.T) {
	b, err := New([]string{"calculator", "search_wikipedia"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var s agent.Searcher = b
	if !s.IsSearch("search_wikipedia") || s.IsSearch("calculator") || s.IsSearch("web_search") {
		t.Error("IsSearch is wrong")
	}
}
