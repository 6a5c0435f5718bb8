package chatcli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/client"
	"koe/config"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// hangGuard turns a hang into a failure; nothing is timed by it. CI is a
// loaded 2-core machine.
const hangGuard = 60 * time.Second

// startKoe runs a real koe against a fake LLM answering with respond
// (the memory's background summaries get a fixed answer) and returns its
// base URL.
func startKoe(t *testing.T, respond func(fakellm.Request) fakellm.Reply, opts ...func(*config.Config)) (string, *fakellm.Server) {
	t.Helper()
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if !r.Stream {
			return fakellm.Reply{Tokens: []string{"They talked."}}
		}
		return respond(r)
	})
	cfg := koetest.Config(t, t.TempDir(), llm.URL())
	for _, o := range opts {
		o(&cfg)
	}
	m := koetest.StartKoe(t, cfg)
	return "http://" + m.Addr(), llm
}

// recorder stands between the chat and koe and notes what the chat asked:
// each request's method and path, and the body of each chat request.
type recorder struct {
	mu       sync.Mutex
	requests []string
	chats    []protocol.ChatRequest
	// swallowStops answers stop requests itself, as if koe had stopped
	// a turn that goes on.
	swallowStops bool
}

func (r *recorder) record(req string, chat *protocol.ChatRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req)
	if chat != nil {
		r.chats = append(r.chats, *chat)
	}
}

func (r *recorder) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

func (r *recorder) Chats() []protocol.ChatRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.ChatRequest(nil), r.chats...)
}

func (r *recorder) lastChat(t *testing.T) protocol.ChatRequest {
	t.Helper()
	chats := r.Chats()
	if len(chats) == 0 {
		t.Fatal("the chat sent no chat request")
	}
	return chats[len(chats)-1]
}

// startRecorder puts a recording reverse proxy in front of the koe at
// base and returns its URL.
func startRecorder(t *testing.T, base string, rec *recorder) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var chat *protocol.ChatRequest
		if strings.HasPrefix(r.URL.Path, "/api/chat/") && !strings.HasSuffix(r.URL.Path, "/stop") {
			chat = new(protocol.ChatRequest)
			if err := json.Unmarshal(body, chat); err != nil {
				t.Errorf("the chat sent %s a body that is not a chat request: %q", r.URL.Path, body)
			}
		}
		rec.record(r.Method+" "+r.URL.Path, chat)
		rec.mu.Lock()
		swallow := rec.swallowStops
		rec.mu.Unlock()
		if swallow && strings.HasSuffix(r.URL.Path, "/stop") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"stopped":true}`)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// screen is the chat's output; waits on it wake at each write.
type screen struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{}
}

func newScreen() *screen { return &screen{written: make(chan struct{}, 1)} }

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.buf.Write(p)
	s.mu.Unlock()
	select {
	case s.written <- struct{}{}:
	default:
	}
	return n, err
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// session is a chat run in the test's process, typed into through a pipe.
type session struct {
	t          *testing.T
	out        *screen
	in         *io.PipeWriter
	interrupts chan os.Signal
	done       chan error
	// seen is how much of the output earlier waits consumed.
	seen int
}

func startChat(t *testing.T, base string, s Settings, animate bool) *session {
	t.Helper()
	s.URL = base
	api, err := client.New(base, client.WithToken(s.Token))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	ss := &session{t: t, out: newScreen(), in: pw, interrupts: make(chan os.Signal, 1), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	term := Terminal{In: pr, Out: ss.out, Interrupts: ss.interrupts, Animate: animate, Echo: true}
	go func() { ss.done <- Run(ctx, api, s, term) }()
	t.Cleanup(func() {
		cancel()
		_ = pw.Close()
		select {
		case <-ss.done:
		case <-time.After(hangGuard):
			t.Error("the chat did not end")
		}
	})
	return ss
}

// send types a line; it is read at the next prompt.
func (s *session) send(line string) {
	s.t.Helper()
	written := make(chan error, 1)
	go func() {
		_, err := io.WriteString(s.in, line+"\n")
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			s.t.Fatalf("typing %q: %v", line, err)
		}
	case <-time.After(hangGuard):
		s.t.Fatalf("the chat never read %q; it showed:\n%s", line, s.out.String())
	}
}

// interrupt is Ctrl-C.
func (s *session) interrupt() {
	s.t.Helper()
	select {
	case s.interrupts <- os.Interrupt:
	case <-time.After(hangGuard):
		s.t.Fatal("the chat took no Ctrl-C")
	}
}

// waitFor waits until the output after what earlier waits consumed holds
// want, and returns that part up to the end of want.
func (s *session) waitFor(want string) string {
	s.t.Helper()
	guard := time.After(hangGuard)
	for {
		out := s.out.String()
		if i := strings.Index(out[s.seen:], want); i >= 0 {
			got := out[s.seen : s.seen+i+len(want)]
			s.seen += i + len(want)
			return got
		}
		select {
		case <-s.out.written:
		case <-guard:
			s.t.Fatalf("waited for %q; the chat showed:\n%s", want, out)
		}
	}
}

// ended waits for the chat to end and returns what Run returned.
func (s *session) ended() error {
	s.t.Helper()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(hangGuard):
		s.t.Fatalf("the chat did not end; it showed:\n%s", s.out.String())
		return nil
	}
}
