package client_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"koe/client"
	"koe/protocol"
)

// These tests put the client in front of servers that misbehave in ways
// koe does not, to see that it tells them apart: what it sends, streams
// that break, answers that are not koe's.

// serve runs handler on a loopback HTTP server for the test.
func serve(t *testing.T, handler http.HandlerFunc) *client.Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL+"/", client.WithToken("tok-123"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sse(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	_, _ = io.WriteString(w, body)
}

func drain(c *client.Client, t *testing.T) ([]client.Event, error) {
	var events []client.Event
	for ev, err := range c.Stream(guard(t), protocol.ChatRequest{Message: "Hi"}) {
		if err != nil {
			return events, err
		}
		events = append(events, ev)
	}
	return events, nil
}

// The request: JSON body to the stream endpoint, the token, no Origin.
func TestStreamRequest(t *testing.T) {
	got := make(chan *http.Request, 1)
	var body protocol.ChatRequest
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&body)
		got <- r
		sse(w, "data: {\"type\":\"end\",\"content\":\"\"}\n\n")
	})
	rate := 0.2
	for _, err := range c.Stream(guard(t), protocol.ChatRequest{Message: "Hi", HistoryUID: "h1", CompressionRate: &rate}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := <-got
	checks := map[string][2]string{
		"method":        {r.Method, http.MethodPost},
		"path":          {r.URL.Path, "/api/chat/stream"},
		"content type":  {r.Header.Get("Content-Type"), "application/json"},
		"accept":        {r.Header.Get("Accept"), "text/event-stream"},
		"authorization": {r.Header.Get("Authorization"), "Bearer tok-123"},
		"origin":        {r.Header.Get("Origin"), ""},
		"body":          {body.Message + "/" + body.HistoryUID, "Hi/h1"},
	}
	for what, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s: %q, want %q", what, c[0], c[1])
		}
	}
	if body.CompressionRate == nil || *body.CompressionRate != 0.2 {
		t.Errorf("compression_rate %v, want 0.2", body.CompressionRate)
	}
}

// A stream in CRLF with heartbeats, an event split over data lines and
// an event type this client does not know decodes event by event.
func TestStreamDecoding(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w, ": hi\r\n\r\n"+
			"data: {\"type\":\"token\",\"content\":\"Hel\"}\r\n\r\n"+
			": heartbeat\r\n"+
			"data: {\"type\":\"token\",\r\ndata: \"content\":\"lo\"}\r\n\r\n"+
			"data: {\"type\":\"status\",\"content\":{\"task_id\":\"llm:1\",\"state\":\"error\",\"content\":\"LLM\",\"error_details\":\"boom\"}}\r\n\r\n"+
			"data: {\"type\":\"future\",\"content\":{\"x\":1}}\r\n\r\n"+
			"data: {\"type\":\"error\",\"content\":\"the LLM failed\"}\r\n\r\n"+
			"data: {\"type\":\"end\",\"content\":\"\"}\r\n\r\n"+
			"data: {\"type\":\"token\",\"content\":\"after the end\"}\r\n\r\n")
	})
	events, err := drain(c, t)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
	}
	if want := []string{"token", "token", "status", "future", "error", "end"}; !slices.Equal(types, want) {
		t.Fatalf("events %q, want %q (nothing after end)", types, want)
	}
	if events[0].Token+events[1].Token != "Hello" {
		t.Errorf("tokens %q %q", events[0].Token, events[1].Token)
	}
	if s := events[2].Status; s == nil || s.TaskID != "llm:1" || s.State != protocol.StatusError || s.ErrorDetails != "boom" {
		t.Errorf("status %+v", s)
	}
	if string(events[3].Content) != `{"x":1}` {
		t.Errorf("unknown event's content %s", events[3].Content)
	}
	if events[4].Error != "the LLM failed" {
		t.Errorf("error %q", events[4].Error)
	}
}

func TestStreamFailures(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		check   func(error) bool
		want    string
	}{
		{"a stream cut before end", func(w http.ResponseWriter, r *http.Request) {
			sse(w, "data: {\"type\":\"token\",\"content\":\"Hel\"}\n\n")
		}, func(err error) bool { return errors.Is(err, client.ErrNoEnd) }, "ErrNoEnd"},
		{"an event cut mid-JSON", func(w http.ResponseWriter, r *http.Request) {
			sse(w, "data: {\"type\":\"token\",\"con")
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "not JSON") }, "not JSON"},
		{"an event with no type", func(w http.ResponseWriter, r *http.Request) {
			sse(w, "data: {\"content\":\"x\"}\n\n")
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "no type") }, "no type"},
		{"a token that is not a string", func(w http.ResponseWriter, r *http.Request) {
			sse(w, "data: {\"type\":\"token\",\"content\":{}}\n\n")
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "token event") }, "the token event's content"},
		{"not an event stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>a login page</html>")
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "not text/event-stream") }, "not text/event-stream"},
		{"koe's JSON error", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":"no history h1 for koe_default"}`)
		}, func(err error) bool {
			var e *client.APIError
			return errors.As(err, &e) && e.StatusCode == 404 && e.Message == "no history h1 for koe_default"
		}, "*APIError 404 with koe's message"},
		{"a proxy's HTML error page", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body>Bad Gateway</body></html>")
		}, func(err error) bool {
			var e *client.APIError
			return errors.As(err, &e) && e.StatusCode == 502 && e.Message == "Bad Gateway"
		}, "*APIError 502 with the status text"},
		{"a plain-text error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "shutting down\n")
		}, func(err error) bool {
			var e *client.APIError
			return errors.As(err, &e) && e.StatusCode == 503 && e.Message == "shutting down"
		}, "*APIError 503 with the text"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := drain(serve(t, tc.handler), t)
			if !tc.check(err) {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}

// An event over the limit fails the stream with the option's name.
func TestStreamEventLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse(w, "data: {\"type\":\"token\",\"content\":\""+strings.Repeat("x", 2000)+"\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, client.WithMaxEventBytes(1000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drain(c, t); err == nil || !strings.Contains(err.Error(), "WithMaxEventBytes") {
		t.Errorf("error %v, want one naming WithMaxEventBytes", err)
	}
}

func TestRequestPaths(t *testing.T) {
	paths := make(chan string, 10)
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		paths <- r.Method + " " + r.URL.RequestURI()
		switch {
		case strings.HasSuffix(r.URL.Path, "/stop"):
			_, _ = io.WriteString(w, `{"history_uid":"h 1","stopped":true}`)
		case strings.HasPrefix(r.URL.Path, "/api/histories/") && strings.Count(r.URL.Path, "/") == 3:
			_, _ = io.WriteString(w, `{"histories":[{"uid":"h1","latest_message":{"role":"ai","content":"hi"},"timestamp":"t"}]}`)
		default:
			_, _ = io.WriteString(w, `{"messages":[],"more":false}`)
		}
	})
	ctx := guard(t)
	if ok, err := c.Stop(ctx, "h 1"); !ok || err != nil {
		t.Errorf("stop: %v %v", ok, err)
	}
	if list, err := c.Histories(ctx, "mika"); err != nil || len(list) != 1 || list[0].LatestMessage.Content != "hi" {
		t.Errorf("histories: %+v %v", list, err)
	}
	if _, err := c.History(ctx, "mika", "h1", 0, 0); err != nil {
		t.Error(err)
	}
	if _, err := c.History(ctx, "mika", "h/1", 17, 5); err != nil {
		t.Error(err)
	}
	want := []string{
		"POST /api/chat/h%201/stop",
		"GET /api/histories/mika",
		"GET /api/histories/mika/h1",
		"GET /api/histories/mika/h%2F1?before=17&limit=5",
	}
	for _, w := range want {
		if got := <-paths; got != w {
			t.Errorf("request %q, want %q", got, w)
		}
	}
}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:12393", "ws://127.0.0.1:12393", "http://", "http://h/?token=x", "http://h/#x", "http://[::1"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted it", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:12393", "https://koe.example.org/koe/"} {
		if _, err := client.New(u); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}
