package tools

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"koe/agent"
)

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string // "" = valid
	}{
		{Config{}, ""},
		{Config{Enabled: []string{"calculator", "get_current_datetime"}, Timeout: time.Second}, ""},
		{Config{Enabled: []string{"calculater"}}, `tools.enabled: unknown tool "calculater"`},
		{Config{Enabled: []string{"calculator", "calculator"}}, "tools.enabled: tool \"calculator\" is enabled twice"},
		{Config{Timeout: -time.Second}, "tools.timeout -1s is negative"},
		{Config{Enabled: []string{"calculator"}, MaxResultChars: 10}, "tools.max_result_chars 10 is out of range"},
		{Config{Enabled: []string{"calculator"}, Calculator: CalculatorSettings{MaxNodes: -1}}, "tools.calculator.max_nodes -1 is negative"},
		{Config{Enabled: []string{"web_search"}, MaxDocumentChars: 99}, "tools.max_document_chars 99 is out of range: 0 (3000) or at least 100"},
		{Config{Enabled: []string{"get_weather"}, HTTP: HTTPSettings{MaxResponseBytes: -1}}, "tools.http.max_response_bytes -1 is negative (default 2097152)"},
		{Config{Enabled: []string{"get_weather"}, HTTP: HTTPSettings{UserAgent: "koe\r\nX-Evil: 1"}}, "tools.http.user_agent must be one line"},
		{Config{Enabled: []string{"get_weather"}, Weather: WeatherSettings{Units: "si"}}, `tools.weather.units "si" is neither metric nor imperial`},
		{Config{Enabled: []string{"get_weather"}, Weather: WeatherSettings{BaseURL: "open-meteo"}}, `tools.weather.base_url "open-meteo" is not an http or https URL`},
		{Config{Enabled: []string{"search_wikipedia"}, Wikipedia: WikipediaSettings{Language: "english"}}, ""},
		{Config{Enabled: []string{"search_wikipedia"}, Wikipedia: WikipediaSettings{Language: "en_GB"}}, `tools.wikipedia.language "en_GB" is not a Wikipedia language code`},
		{Config{Enabled: []string{"web_search"}}, "tools.web_search.provider is required: searxng or tavily"},
		{Config{Enabled: []string{"web_search"}, WebSearch: WebSearchSettings{Provider: "searxng"}}, "tools.web_search.base_url is required with provider searxng"},
		{Config{Enabled: []string{"web_search"}, WebSearch: WebSearchSettings{Provider: "tavily", APIKeyEnv: "KOE_TEST_UNSET_KEY"}},
			"tools.web_search.api_key_env: the environment variable KOE_TEST_UNSET_KEY is empty or not set"},
		{Config{Enabled: []string{"read_file"}}, "tools.files.root is required"},
		{Config{Enabled: []string{"read_file"}, Files: FilesSettings{Root: "/nonexistent/koe"}}, `tools.files.root "/nonexistent/koe": stat /nonexistent/koe: no such file or directory`},
		{Config{Enabled: []string{"read_file"}, Files: FilesSettings{Root: "/", MaxBytes: -1}}, "tools.files.max_bytes -1 is negative"},
		// A tool's settings matter once it is enabled.
		{Config{Enabled: []string{"calculator"}, Files: FilesSettings{MaxBytes: -1}, WebSearch: WebSearchSettings{Provider: "bing"}}, ""},
	} {
		err := tc.c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.c, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
	b, err := Config{Enabled: []string{"get_current_datetime"}}.Box(Options{})
	if err != nil || len(b.Specs()) != 1 || b.Specs()[0].Name != "get_current_datetime" {
		t.Errorf("Box: %v, %v", b, err)
	}
	if b, err := (Config{}).Box(Options{}); b != nil || err != nil {
		t.Errorf("no tools enabled: %v, %v", b, err)
	}
}

// The environment and the HTTP client come from the caller.
func TestConfigBoxTakesTheEnvironment(t *testing.T) {
	srv, _ := tavilyServer(t, fixture(t, 200, "tavily/results.json"))
	c := Config{Enabled: []string{"web_search"}, WebSearch: WebSearchSettings{Provider: "tavily", BaseURL: srv.URL, APIKeyEnv: "KOE_TEST_KEY"}}
	t.Setenv("KOE_TEST_KEY", "from-the-process")
	if err := c.Validate(); err != nil {
		t.Fatalf("the process's environment: %v", err)
	}
	b, err := c.Box(Options{Getenv: func(k string) string { return map[string]string{"KOE_TEST_KEY": "injected"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Call(context.Background(), agent.ToolCall{Name: "web_search", Arguments: `{"query":"q"}`}); err != nil {
		t.Fatal(err)
	}
	if auth := srv.got()[0].header.Get("Authorization"); auth != "Bearer injected" {
		t.Errorf("Authorization %q", auth)
	}
	seen := false
	client := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		seen = true
		return nil, errors.New("not sent")
	})}
	b, err = c.Box(Options{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	b.Call(context.Background(), agent.ToolCall{Name: "web_search", Arguments: `{"query":"q"}`})
	if !seen {
		t.Error("the box did not use the caller's HTTP client")
	}
}
