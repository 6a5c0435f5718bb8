package mcp

import (
	"strings"
	"testing"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestResultText(t *testing.T) {
	size3 := int64(3)
	for _, tc := range []struct {
		res  *sdk.CallToolResult
		want string
	}{
		{&sdk.CallToolResult{}, ""},
		{&sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb"},
		{&sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 12*1024)}}}, "[image/png, 12 KB]"},
		{&sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: make([]byte, 100)}}}, "[image, 100 B]"},
		{&sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 3*1024*1024/2)}}}, "[audio/wav, 1.5 MB]"},
		{&sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///a.txt", Name: "a", Size: &size3}}}, "[resource link file:///a.txt (a)]"},
		{&sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///n.md", Text: "# notes"}}}}, "[resource file:///n.md]\n# notes"},
		{&sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///z", MIMEType: "application/zip", Blob: make([]byte, 2048)}}}}, "[resource file:///z, application/zip, 2 KB]"},
		{&sdk.CallToolResult{StructuredContent: map[string]any{"sum": 5}}, `{"sum":5}`},
	} {
		if got := resultText(tc.res); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.res.Content, got, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	if got := cut("short", 200); got != "short" {
		t.Errorf("cut a short text: %q", got)
	}
	for _, limit := range []int{200, 999, 1000, 1001, 16000} {
		for _, n := range []int{limit + 1, 2 * limit, 10 * limit, 123456} {
			got := cut(strings.Repeat("ü", n), limit)
			if c := utf8.RuneCountInString(got); c != limit {
				t.Errorf("cut %d to %d: %d characters", n, limit, c)
			}
			if !strings.HasSuffix(got, " characters are shown (mcp_max_result_chars)]") {
				t.Errorf("cut %d to %d: no note: …%s", n, limit, got[len(got)-60:])
			}
		}
	}
}

// A tool's spec carries the server's schema as it is, or any object, and
// its description cut to mcp_max_description_chars; it names its server.
func TestToolSpec(t *testing.T) {
	srv := &server{name: "s", limits: Config{MaxDescriptionChars: 60}.limits()}
	toolSpec := srv.toolSpec
	schema := map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}}
	for _, tc := range []struct {
		tool       sdk.Tool
		desc, want string
	}{
		{sdk.Tool{Name: "search", Description: "Searches.", InputSchema: schema}, "Searches.", `{"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"}`},
		{sdk.Tool{Name: "now", Title: "Current time"}, "Current time", `{"type":"object"}`},
		{sdk.Tool{Name: "long", Description: strings.Repeat("wordy ", 20)}, "wordy wordy wordy wordy wordy wordy wordy wordy wordy wo […]", `{"type":"object"}`},
		{sdk.Tool{Name: "long2", Description: strings.Repeat("é", 61)}, strings.Repeat("é", 56) + " […]", `{"type":"object"}`},
		{sdk.Tool{Name: "fits", Description: strings.Repeat("é", 60)}, strings.Repeat("é", 60), `{"type":"object"}`},
	} {
		spec, err := toolSpec("s__"+tc.tool.Name, &tc.tool)
		if err != nil || spec.Name != "s__"+tc.tool.Name || spec.Description != tc.desc || string(spec.Parameters) != tc.want || spec.Source != "MCP server s" {
			t.Errorf("%s: %+v %s, %v", tc.tool.Name, spec, spec.Parameters, err)
		}
	}
	if _, err := toolSpec("s__bad", &sdk.Tool{Name: "bad", InputSchema: map[string]any{"x": func() {}}}); err == nil {
		t.Error("a schema that is not JSON: no error")
	}
}
