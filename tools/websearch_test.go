package tools

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func searxngServer(t *testing.T, handle http.HandlerFunc) (*recorder, Options) {
	t.Helper()
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" {
			http.NotFound(w, r)
			return
		}
		handle(w, r)
	})
	return srv, Options{WebSearch: WebSearchSettings{Provider: ProviderSearXNG, BaseURL: srv.URL + "/"}}
}

const tavilyKey = "tvly-test-0123456789"

func tavilyServer(t *testing.T, handle http.HandlerFunc) (*recorder, Options) {
	t.Helper()
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		handle(w, r)
	})
	env := map[string]string{"TAVILY_API_KEY": tavilyKey}
	return srv, Options{
		WebSearch: WebSearchSettings{Provider: ProviderTavily, BaseURL: srv.URL},
		Getenv:    func(k string) string { return env[k] },
	}
}

func TestSearXNG(t *testing.T) {
	srv, opts := searxngServer(t, fixture(t, 200, "searxng/results.json"))
	got, err := callTool(t, "web_search", opts, `{"query":"koe voice server","limit":2}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"documents":[` +
		`{"document":1,"title":"koe: talk to your characters","metadata":{"url":"https://example.org/koe"},"contents":"koe is a real-time voice conversation server that speaks the Open-LLM-VTuber protocol."},` +
		`{"document":2,"title":"Open-LLM-VTuber","metadata":{"url":"https://example.com/olv"},"contents":"A voice interactive AI companion."}]}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	reqs := srv.got()
	if len(reqs) != 1 || reqs[0].method != "GET" || !sameQuery(reqs[0].query, url.Values{"q": {"koe voice server"}, "format": {"json"}}) {
		t.Errorf("requests %+v", reqs)
	}
	// Without a limit, the default, and all three results fit.
	got, err = callTool(t, "web_search", opts, `{"query":"koe"}`)
	if d := parseDocuments(t, got); err != nil || len(d.Documents) != 3 || d.Documents[2].Contents != "" {
		t.Errorf("got %s, %v", got, err)
	}
}

func TestTavily(t *testing.T) {
	srv, opts := tavilyServer(t, fixture(t, 200, "tavily/results.json"))
	got, err := callTool(t, "web_search", opts, `{"query":"latest Go release","limit":4}`)
	if err != nil {
		t.Fatal(err)
	}
	// "<" and "&" stay as they are for the model to read.
	want := `{"documents":[` +
		`{"document":1,"title":"Go 1.26 is released","metadata":{"url":"https://example.org/go-release"},"contents":"The Go team announces Go 1.26, with <generic> improvements & more."},` +
		`{"document":2,"title":"Go 1.26 Release Notes","metadata":{"url":"https://example.com/notes"},"contents":"Go 1.26 arrives six months after Go 1.25."}]}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	reqs := srv.got()
	if len(reqs) != 1 {
		t.Fatalf("requests %+v", reqs)
	}
	r := reqs[0]
	if auth := r.header.Get("Authorization"); auth != "Bearer "+tavilyKey {
		t.Errorf("Authorization %q", auth)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || len(body) != 2 || body["query"] != "latest Go release" || body["max_results"] != 4.0 {
		t.Errorf("body %s (%v)", r.body, err)
	}
	if len(r.query) != 0 {
		t.Errorf("the key or the query went into the URL: %v", r.query)
	}
}

func TestWebSearchFailures(t *testing.T) {
	type server func(*testing.T, http.HandlerFunc) (*recorder, Options)
	tests := []struct {
		name   string
		server server
		handle http.HandlerFunc
		args   string
		want   string
		isErr  bool
	}{
		{name: "searxng empty", server: searxngServer, handle: fixture(t, 200, "searxng/empty.json"), args: `{"query":"zzzxqv"}`,
			want: `No results were found for "zzzxqv".`},
		{name: "searxng json off", server: searxngServer, handle: fixture(t, 403, "searxng/forbidden.html"), args: `{"query":"x"}`, isErr: true,
			want: "the SearXNG server answered HTTP 403 Forbidden: 403 Forbidden (is json in the instance's search.formats setting?)"},
		{name: "searxng rate limited", server: searxngServer, handle: answer(429, "text/plain", "Too Many Requests"), args: `{"query":"x"}`, isErr: true,
			want: "the SearXNG server answered HTTP 429 Too Many Requests: Too Many Requests"},
		{name: "searxng page", server: searxngServer, handle: fixture(t, 200, "bad_gateway.html"), args: `{"query":"x"}`, isErr: true,
			want: `the SearXNG server sent a web page, not JSON ("502 Bad Gateway"): is its URL right?`},
		{name: "tavily empty", server: tavilyServer, handle: answer(200, "application/json", `{"query":"q","results":[],"response_time":0.4}`), args: `{"query":"q"}`,
			want: `No results were found for "q".`},
		{name: "tavily unauthorized", server: tavilyServer, handle: fixture(t, 401, "tavily/unauthorized.json"), args: `{"query":"x"}`, isErr: true,
			want: "Tavily answered HTTP 401 Unauthorized: Unauthorized: missing or invalid API key."},
		{name: "tavily plan limit", server: tavilyServer, handle: answer(432, "application/json", `{"detail":{"error":"This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com"}}`),
			args: `{"query":"x"}`, isErr: true, want: "Tavily answered HTTP 432: This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com"},
		{name: "tavily bad gateway", server: tavilyServer, handle: fixture(t, 502, "bad_gateway.html"), args: `{"query":"x"}`, isErr: true,
			want: "Tavily answered HTTP 502 Bad Gateway: 502 Bad Gateway"},
		{name: "empty query", server: searxngServer, handle: fixture(t, 200, "searxng/empty.json"), args: `{"query":""}`, isErr: true, want: "the query is empty"},
		{name: "limit zero", server: tavilyServer, handle: fixture(t, 200, "tavily/results.json"), args: `{"query":"x","limit":0}`, isErr: true,
			want: `argument "limit" must be a whole number from 1 to 10, not 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, opts := tt.server(t, tt.handle)
			got, err := callTool(t, "web_search", opts, tt.args)
			if tt.isErr {
				if err == nil || err.Error() != tt.want {
					t.Fatalf("got %q, %v\nwant the error %q", got, err, tt.want)
				}
				if strings.Contains(err.Error(), tavilyKey) {
					t.Fatal("the error shows the API key")
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v\nwant %q", got, err, tt.want)
			}
		})
	}
}

// Many long results still make valid JSON within tools.max_result_chars:
// their contents shrink rather than the JSON being cut.
func TestWebSearchFitsTheResultLimit(t *testing.T) {
	var results []map[string]string
	for i := range 10 {
		results = append(results, map[string]string{
			"title": fmt.Sprintf("Result %d", i+1), "url": fmt.Sprintf("https://example.org/%d", i+1),
			"content": strings.Repeat("ünïcödé wörds ", 500),
		})
	}
	body, _ := json.Marshal(map[string]any{"query": "q", "results": results})
	for _, limit := range []int{1000, 4000, 16000} {
		_, opts := searxngServer(t, answer(200, "application/json", string(body)))
		opts.MaxResultChars = limit
		got, err := callTool(t, "web_search", opts, `{"query":"q","limit":10}`)
		if err != nil {
			t.Fatal(err)
		}
		if n := utf8.RuneCountInString(got); n > limit {
			t.Errorf("limit %d: %d characters", limit, n)
		}
		d := parseDocuments(t, got)
		if len(d.Documents) == 0 || d.Documents[0].Title != "Result 1" || d.Documents[0].Document != 1 {
			t.Errorf("limit %d: %s", limit, got)
		}
		if limit == 16000 && len(d.Documents) != 10 {
			t.Errorf("limit 16000: %d documents, want all 10 shortened", len(d.Documents))
		}
	}
}

func TestWebSearchSettings(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	for _, tt := range []struct {
		s    WebSearchSettings
		env  map[string]string
		want string // "" = valid
	}{
		{s: WebSearchSettings{Provider: "searxng", BaseURL: "http://127.0.0.1:8888"}},
		{s: WebSearchSettings{Provider: "tavily"}, env: map[string]string{"TAVILY_API_KEY": "k"}},
		{s: WebSearchSettings{Provider: "tavily", APIKeyEnv: "MY_KEY"}, env: map[string]string{"MY_KEY": "k"}},
		{s: WebSearchSettings{}, want: "tools.web_search.provider is required: searxng or tavily"},
		{s: WebSearchSettings{Provider: "google"}, want: `tools.web_search.provider "google" is unknown: searxng or tavily`},
		{s: WebSearchSettings{Provider: "searxng"}, want: "tools.web_search.base_url is required with provider searxng: the address of a SearXNG instance"},
		{s: WebSearchSettings{Provider: "searxng", BaseURL: "searx.lan"}, want: `tools.web_search.base_url "searx.lan" is not an http or https URL without a query`},
		{s: WebSearchSettings{Provider: "tavily"}, want: "tools.web_search.api_key_env: the environment variable TAVILY_API_KEY is empty or not set; web_search with provider tavily needs its API key there"},
		{s: WebSearchSettings{Provider: "tavily"}, env: map[string]string{"TAVILY_API_KEY": "  "}, want: "the environment variable TAVILY_API_KEY is empty or not set"},
		{s: WebSearchSettings{Provider: "tavily", APIKeyEnv: "MY_KEY"}, env: map[string]string{"TAVILY_API_KEY": "k"}, want: "the environment variable MY_KEY is empty"},
		{s: WebSearchSettings{Provider: "tavily", APIKeyEnv: "$MY_KEY"}, want: `tools.web_search.api_key_env "$MY_KEY" is not an environment variable name`},
		{s: WebSearchSettings{Provider: "tavily", BaseURL: "ftp://x"}, env: map[string]string{"TAVILY_API_KEY": "k"}, want: `tools.web_search.base_url "ftp://x" is not`},
	} {
		_, err := New([]string{"web_search"}, Options{WebSearch: tt.s, Getenv: env(tt.env)})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.s, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: %v, want %q", tt.s, err, tt.want)
		}
	}
}
