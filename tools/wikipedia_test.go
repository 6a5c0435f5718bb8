package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"koe/agent"
)

// mediaWiki is a fake MediaWiki answering /w/api.php with handle.
func mediaWiki(t *testing.T, handle http.HandlerFunc) (*recorder, Options) {
	t.Helper()
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/w/api.php" {
			http.NotFound(w, r)
			return
		}
		handle(w, r)
	})
	return srv, Options{Wikipedia: WikipediaSettings{BaseURL: srv.URL}}
}

func callTool(t *testing.T, name string, opts Options, args string) (string, error) {
	t.Helper()
	b := newBox(t, []string{name}, opts)
	return b.Call(context.Background(), agent.ToolCall{Name: name, Arguments: args})
}

// parsedDocuments reads a search result back as the model would.
type parsedDocuments struct {
	Documents []struct {
		Document int    `json:"document"`
		Title    string `json:"title"`
		Metadata struct {
			URL string `json:"url"`
		} `json:"metadata"`
		Contents string `json:"contents"`
	} `json:"documents"`
}

func parseDocuments(t *testing.T, s string) parsedDocuments {
	t.Helper()
	var d parsedDocuments
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("not the documents JSON: %v\n%s", err, s)
	}
	return d
}

func TestWikipedia(t *testing.T) {
	srv, opts := mediaWiki(t, fixture(t, 200, "mediawiki/search_einstein.json"))
	got, err := callTool(t, "search_wikipedia", opts, `{"query":"Einstein  ","limit":3}`)
	if err != nil {
		t.Fatal(err)
	}
	d := parseDocuments(t, got)
	// In the search's order (index), not the answer's.
	want := []struct{ title, url, start string }{
		{"Albert Einstein", "https://en.wikipedia.org/wiki/Albert_Einstein", "Albert Einstein (14 March 1879 – 18 April 1955) was a German-born"},
		{"Hans Albert Einstein", "https://en.wikipedia.org/wiki/Hans_Albert_Einstein", "(This article has no introduction.)"},
		{"Einstein family", "https://en.wikipedia.org/wiki/Einstein_family", "The Einstein family is the family"},
	}
	if len(d.Documents) != len(want) {
		t.Fatalf("%d documents: %s", len(d.Documents), got)
	}
	for i, w := range want {
		doc := d.Documents[i]
		if doc.Document != i+1 || doc.Title != w.title || doc.Metadata.URL != w.url || !strings.HasPrefix(doc.Contents, w.start) {
			t.Errorf("document %d: %+v", i+1, doc)
		}
	}
	// Paragraphs of an introduction stay apart.
	if !strings.Contains(d.Documents[0].Contents, "quantum mechanics.\nHe received") {
		t.Errorf("contents %q", d.Documents[0].Contents)
	}
	reqs := srv.got()
	if len(reqs) != 1 || reqs[0].method != "GET" {
		t.Fatalf("requests: %+v", reqs)
	}
	wantQuery := url.Values{
		"action": {"query"}, "format": {"json"}, "formatversion": {"2"}, "utf8": {"1"},
		"generator": {"search"}, "gsrsearch": {"Einstein"}, "gsrlimit": {"3"},
		"prop": {"extracts|info"}, "exintro": {"1"}, "explaintext": {"1"}, "exlimit": {"max"}, "inprop": {"url"}, "redirects": {"1"},
	}
	if !sameQuery(reqs[0].query, wantQuery) {
		t.Errorf("query %v\nwant %v", reqs[0].query, wantQuery)
	}
	if reqs[0].header.Get("User-Agent") == "" || strings.HasPrefix(reqs[0].header.Get("User-Agent"), "Go-http-client") {
		t.Errorf("User-Agent %q: Wikimedia asks for one that names the client", reqs[0].header.Get("User-Agent"))
	}
}

func TestWikipediaLimitAndDefaults(t *testing.T) {
	srv, opts := mediaWiki(t, fixture(t, 200, "mediawiki/search_einstein.json"))
	got, err := callTool(t, "search_wikipedia", opts, `{"query":"Einstein","limit":2}`)
	if err != nil {
		t.Fatal(err)
	}
	// A server that gives more than asked does not get them through.
	if d := parseDocuments(t, got); len(d.Documents) != 2 || d.Documents[1].Title != "Hans Albert Einstein" {
		t.Errorf("got %s", got)
	}
	if _, err := callTool(t, "search_wikipedia", opts, `{"query":"Einstein"}`); err != nil {
		t.Fatal(err)
	}
	if q := srv.got(); q[0].query.Get("gsrlimit") != "2" || q[1].query.Get("gsrlimit") != "3" {
		t.Errorf("gsrlimit %q then %q", q[0].query.Get("gsrlimit"), q[1].query.Get("gsrlimit"))
	}
}

// A page without fullurl gets the canonical /wiki/ address of the
// configured wiki; long introductions are cut.
func TestWikipediaURLsAndLongExtracts(t *testing.T) {
	long := strings.Repeat("Lorem ipsum dolor sit amet. ", 400)
	body, _ := json.Marshal(map[string]any{"batchcomplete": true, "query": map[string]any{"pages": []map[string]any{
		{"pageid": 1, "ns": 0, "title": "C++ (programming language)", "index": 1, "extract": long},
		{"pageid": 2, "ns": 0, "title": "Ghost page", "index": 2, "missing": true},
	}}})
	_, opts := mediaWiki(t, answer(200, "application/json", string(body)))
	opts.MaxDocumentChars = 500
	got, err := callTool(t, "search_wikipedia", opts, `{"query":"C++"}`)
	if err != nil {
		t.Fatal(err)
	}
	d := parseDocuments(t, got)
	if len(d.Documents) != 1 {
		t.Fatalf("got %s", got)
	}
	doc := d.Documents[0]
	if want := opts.Wikipedia.BaseURL + "/wiki/C++_%28programming_language%29"; doc.Metadata.URL != want {
		t.Errorf("url %q, want %q", doc.Metadata.URL, want)
	}
	if n := utf8.RuneCountInString(doc.Contents); n != 500 || !strings.HasSuffix(doc.Contents, "…") {
		t.Errorf("contents of %d characters: …%q", n, doc.Contents[len(doc.Contents)-20:])
	}
}

func TestWikipediaFailures(t *testing.T) {
	tests := []struct {
		name   string
		handle http.HandlerFunc
		args   string
		want   string
		isErr  bool
	}{
		{name: "no results", handle: fixture(t, 200, "mediawiki/no_results.json"), args: `{"query":"zzxqv"}`, want: `No results were found for "zzxqv".`},
		{name: "no pages", handle: answer(200, "application/json", `{"batchcomplete":true,"query":{"pages":[]}}`), args: `{"query":"zzxqv"}`, want: `No results were found for "zzxqv".`},
		{name: "api error with 200", handle: fixture(t, 200, "mediawiki/error_badvalue.json"), args: `{"query":"x"}`, isErr: true,
			want: `the Wikipedia API refused the search: Unrecognized value for parameter "list": searc.`},
		{name: "rate limited", handle: answer(429, "text/html; charset=utf-8", "<!DOCTYPE html>\n<html lang=\"en\"><head><title>Wikimedia Error</title></head><body>"+strings.Repeat("x", 5000)+"</body></html>"),
			args: `{"query":"x"}`, isErr: true, want: "Wikipedia answered HTTP 429 Too Many Requests: Wikimedia Error"},
		{name: "empty query", handle: fixture(t, 200, "mediawiki/no_results.json"), args: `{"query":"   "}`, isErr: true, want: "the query is empty"},
		{name: "limit", handle: fixture(t, 200, "mediawiki/no_results.json"), args: `{"query":"x","limit":11}`, isErr: true,
			want: `argument "limit" must be a whole number from 1 to 10, not 11`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, opts := mediaWiki(t, tt.handle)
			got, err := callTool(t, "search_wikipedia", opts, tt.args)
			if tt.isErr {
				if err == nil || err.Error() != tt.want {
					t.Fatalf("got %q, %v\nwant the error %q", got, err, tt.want)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v\nwant %q", got, err, tt.want)
			}
		})
	}
}

func TestWikipediaSettings(t *testing.T) {
	for _, tt := range []struct {
		s       WikipediaSettings
		wantErr string
		wantURL string
	}{
		{s: WikipediaSettings{}, wantURL: "https://en.wikipedia.org"},
		{s: WikipediaSettings{Language: "de"}, wantURL: "https://de.wikipedia.org"},
		{s: WikipediaSettings{Language: "zh-yue"}, wantURL: "https://zh-yue.wikipedia.org"},
		{s: WikipediaSettings{BaseURL: "http://wiki.lan:8080/", Language: "fr"}, wantURL: "http://wiki.lan:8080/"},
		{s: WikipediaSettings{BaseURL: "https://{lang}.wikipedia.example", Language: "ja"}, wantURL: "https://ja.wikipedia.example"},
		{s: WikipediaSettings{Language: "EN"}, wantErr: `tools.wikipedia.language "EN" is not a Wikipedia language code such as en, de or zh-yue`},
		{s: WikipediaSettings{Language: "e"}, wantErr: `tools.wikipedia.language "e" is not`},
		{s: WikipediaSettings{Language: "en.evil.example/x"}, wantErr: `tools.wikipedia.language "en.evil.example/x" is not`},
		{s: WikipediaSettings{Language: "abcdefghijklm"}, wantErr: `tools.wikipedia.language "abcdefghijklm" is not`},
		{s: WikipediaSettings{BaseURL: "wikipedia.org"}, wantErr: `tools.wikipedia.base_url "wikipedia.org" is not an http or https URL`},
	} {
		// Where the request goes, seen by a transport that sends nothing.
		var seen string
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seen = r.URL.Scheme + "://" + r.URL.Host + r.URL.Path
			return nil, errors.New("not sent")
		})}
		_, err := callToolErr("search_wikipedia", Options{Wikipedia: tt.s, HTTPClient: client}, `{"query":"x"}`)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: %v, want %q", tt.s, err, tt.wantErr)
			}
			continue
		}
		if want := strings.TrimSuffix(tt.wantURL, "/") + "/w/api.php"; seen != want {
			t.Errorf("%+v: asked %q, want %q (%v)", tt.s, seen, want, err)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// callToolErr builds a box of one tool and calls it; a settings error is
// the error.
func callToolErr(name string, opts Options, args string) (string, error) {
	b, err := New([]string{name}, opts)
	if err != nil {
		return "", err
	}
	return b.Call(context.Background(), agent.ToolCall{Name: name, Arguments: args})
}
