package tools

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an API server for tests: it answers with handle and keeps
// every request it got.
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	method, path string
	query        url.Values
	header       http.Header
	body         string
}

func newRecorder(t *testing.T, handle http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.requests = append(rec.requests, recorded{r.Method, r.URL.Path, r.URL.Query(), r.Header.Clone(), string(body)})
		rec.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) got() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.requests...)
}

// fixture answers with a file of testdata and a status.
func fixture(t *testing.T, status int, name string) http.HandlerFunc {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		if strings.HasSuffix(name, ".json") {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		}
		w.WriteHeader(status)
		w.Write(body)
	}
}

func answer(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestWebClientErrors(t *testing.T) {
	type shape struct {
		Results []struct {
			Name string `json:"name"`
		} `json:"results"`
	}
	tests := []struct {
		name    string
		handle  http.HandlerFunc
		max     int64
		want    string // the whole error, "" for success
		wantGot string
	}{
		{name: "ok", handle: answer(200, "application/json", `{"results":[{"name":"Berlin"}]}`), wantGot: "Berlin"},
		{name: "exactly the limit", max: 32, handle: answer(200, "application/json", `{"results":[{"name":"Berlin"}]}`+strings.Repeat(" ", 32-31)), wantGot: "Berlin"},
		{name: "one byte over", max: 32, handle: answer(200, "application/json", `{"results":[{"name":"Berlin"}]}`+strings.Repeat(" ", 2)),
			want: "the test service sent more than 32 bytes, the limit of tools.http.max_response_bytes"},
		{name: "large", max: 2 << 20, handle: answer(200, "application/json", `{"results":[{"name":"`+strings.Repeat("x", 3<<20)+`"}]}`),
			want: "the test service sent more than 2 MB, the limit of tools.http.max_response_bytes"},
		{name: "json error", handle: fixture(t, 400, "openmeteo/error_400.json"),
			want: "the test service answered HTTP 400 Bad Request: Parameter 'forecast_days' is out of allowed range from 0 to 16"},
		{name: "nested json error", handle: fixture(t, 401, "tavily/unauthorized.json"),
			want: "the test service answered HTTP 401 Unauthorized: Unauthorized: missing or invalid API key."},
		{name: "html error page", handle: fixture(t, 502, "bad_gateway.html"),
			want: "the test service answered HTTP 502 Bad Gateway: 502 Bad Gateway"},
		{name: "html error page, huge", handle: answer(503, "text/html", "<!DOCTYPE html><html><head><title>\n  Down for\n maintenance &amp; more </title></head><body>"+strings.Repeat("<p>sorry</p>", 100000)+"</body></html>"),
			want: "the test service answered HTTP 503 Service Unavailable: Down for maintenance & more"},
		{name: "plain text error", handle: answer(500, "text/plain", "upstream exploded\nstack trace line 1\nstack trace line 2"),
			want: "the test service answered HTTP 500 Internal Server Error: upstream exploded"},
		{name: "empty error", handle: answer(404, "text/plain", ""), want: "the test service answered HTTP 404 Not Found"},
		{name: "odd status", handle: answer(432, "application/json", `{"detail":{"error":"This request exceeds your plan's set usage limit."}}`),
			want: "the test service answered HTTP 432: This request exceeds your plan's set usage limit."},
		{name: "html with 200", handle: fixture(t, 200, "bad_gateway.html"),
			want: `the test service sent a web page, not JSON ("502 Bad Gateway"): is its URL right?`},
		{name: "not json", handle: answer(200, "text/plain", "hello"),
			want: "the test service sent a reply that is not JSON (invalid character 'h' looking for beginning of value)"},
		{name: "wrong shape", handle: answer(200, "application/json", `{"results":{"name":"Berlin"}}`),
			want: "the test service sent JSON of an unexpected shape (results is an object, not an array)"},
		{name: "wrong shape deeper", handle: answer(200, "application/json", `{"results":[{"name":7}]}`),
			want: "the test service sent JSON of an unexpected shape (results.name is a number, not a string)"},
		{name: "wrong shape whole", handle: answer(200, "application/json", `[1]`),
			want: "the test service sent JSON of an unexpected shape (the whole is an array, not an object)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newRecorder(t, tt.handle)
			w := newWebClient(Options{HTTP: HTTPSettings{MaxResponseBytes: tt.max}}, "the test service")
			var got shape
			err := w.getJSON(context.Background(), srv.URL+"/v1/search?name=x", &got)
			if tt.want == "" {
				if err != nil || len(got.Results) != 1 || got.Results[0].Name != tt.wantGot {
					t.Fatalf("got %+v, %v", got, err)
				}
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// A server that never stops sending costs max_response_bytes, not memory
// until the call times out.
func TestWebClientStopsReadingAtTheLimit(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"results":["`)
		chunk := strings.Repeat("x", 4096)
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	// Only a hang guard: the answer comes once 64 KB are in.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var v any
	err := newWebClient(Options{HTTP: HTTPSettings{MaxResponseBytes: 64 << 10}}, "the endless service").getJSON(ctx, srv.URL, &v)
	if err == nil || err.Error() != "the endless service sent more than 64 KB, the limit of tools.http.max_response_bytes" {
		t.Fatalf("got %v", err)
	}
}

func TestWebClientSendsWhoItIs(t *testing.T) {
	srv := newRecorder(t, answer(200, "application/json", `{}`))
	var v struct{}
	if err := newWebClient(Options{}, "x").getJSON(context.Background(), srv.URL, &v); err != nil {
		t.Fatal(err)
	}
	custom := Options{HTTP: HTTPSettings{UserAgent: "my-koe/2 (ops@example.org)"}}
	if err := newWebClient(custom, "x").getJSON(context.Background(), srv.URL, &v); err != nil {
		t.Fatal(err)
	}
	reqs := srv.got()
	if ua := reqs[0].header.Get("User-Agent"); ua != DefaultUserAgent {
		t.Errorf("User-Agent %q", ua)
	}
	if ua := reqs[1].header.Get("User-Agent"); ua != "my-koe/2 (ops@example.org)" {
		t.Errorf("User-Agent %q", ua)
	}
	if a := reqs[0].header.Get("Accept"); a != "application/json" {
		t.Errorf("Accept %q", a)
	}
}

// A request that hangs ends when its ctx does, before or during the body,
// and says why in the words Box.Call uses.
func TestWebClientHonoursContext(t *testing.T) {
	for _, stage := range []string{"before the headers", "during the body"} {
		t.Run(stage, func(t *testing.T) {
			arrived := make(chan struct{})
			srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if stage == "during the body" {
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"results":[`)
					w.(http.Flusher).Flush()
				}
				close(arrived)
				<-r.Context().Done()
			})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				var v any
				errc <- newWebClient(Options{}, "x").getJSON(ctx, srv.URL, &v)
			}()
			<-arrived
			cancel()
			select {
			case err := <-errc:
				if err == nil || err.Error() != "the tool call was cancelled" || !errors.Is(err, context.Canceled) {
					t.Fatalf("got %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the request did not end with its ctx")
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		srv := newRecorder(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var v any
		err := newWebClient(Options{}, "x").getJSON(ctx, srv.URL, &v)
		if err == nil || err.Error() != "the tool call timed out" || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestWebClientUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var v any
	err = newWebClient(Options{}, "the weather service").getJSON(context.Background(), "http://"+addr+"/v1/forecast?latitude=1", &v)
	if err == nil || !strings.HasPrefix(err.Error(), "the weather service could not be reached: ") ||
		!strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "latitude") {
		t.Fatalf("got %v", err)
	}
}
