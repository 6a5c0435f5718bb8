package chatcli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"koe/protocol"
	"koe/testkit/fakellm"
)

// restartingFront stands between the chat and a real koe and does to chat
// requests what a restarting koe behind a proxy does: it refuses the next
// ones as a draining koe does (503, Retry-After, "draining": true), or
// cuts the next stream once it has carried a token, as a connection that
// breaks. It records each chat request.
type restartingFront struct {
	mu      sync.Mutex
	refuse  int
	cutNext bool
	chats   []protocol.ChatRequest
}

func (f *restartingFront) set(refuse int, cut bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse, f.cutNext = refuse, cut
}

func (f *restartingFront) requests() []protocol.ChatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.ChatRequest(nil), f.chats...)
}

func startRestartingFront(t *testing.T, base string, f *restartingFront) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/chat/stream" {
			proxy.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var chat protocol.ChatRequest
		if err := json.Unmarshal(body, &chat); err != nil {
			t.Errorf("a chat request that is not one: %q", body)
		}
		f.mu.Lock()
		f.chats = append(f.chats, chat)
		refuse, cut := f.refuse > 0, f.cutNext && f.refuse == 0
		if refuse {
			f.refuse--
		} else if cut {
			f.cutNext = false
		}
		f.mu.Unlock()
		switch {
		case refuse:
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":"koe is restarting","draining":true}`)
		case cut:
			proxy.ServeHTTP(&cutAfterToken{ResponseWriter: w}, r)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// cutAfterToken passes a stream on until it has carried a token event,
// then breaks the connection (the server aborts the handler).
type cutAfterToken struct{ http.ResponseWriter }

func (c *cutAfterToken) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	if bytes.Contains(p, []byte(`"type":"token"`)) {
		http.NewResponseController(c.ResponseWriter).Flush()
		panic(http.ErrAbortHandler)
	}
	return n, err
}

func (c *cutAfterToken) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }

// A turn koe refuses while it restarts is sent again, the user is told,
// and it goes on in the same history; a stream that breaks is said to
// have broken, and the next message goes on in the same history too.
func TestChatGoesOnAcrossARestart(t *testing.T) {
	var mu sync.Mutex
	var seen [][]fakellm.Message // what the LLM was sent, turn by turn
	base, _ := startKoe(t, func(r fakellm.Request) fakellm.Reply {
		mu.Lock()
		seen = append(seen, r.Messages)
		mu.Unlock()
		last := lastLine(r.Messages[len(r.Messages)-1].Content)
		if strings.HasPrefix(last, "long") {
			return fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("La la la. ", 2000)), Interval: 0}
		}
		return fakellm.Reply{Tokens: fakellm.Words("You said " + last + ".")}
	})
	front := &restartingFront{}
	s := startChat(t, startRestartingFront(t, base, front), Settings{}, false)

	s.waitFor(userPrompt)
	s.send("one")
	s.waitFor("You said one.\n" + userPrompt)
	first := front.requests()[0]
	if first.HistoryUID != "" {
		t.Fatalf("the first turn named history %q", first.HistoryUID)
	}

	// koe drains: the turn is refused twice, then taken.
	front.set(2, false)
	s.send("two")
	got := s.waitFor("You said two.\n" + userPrompt)
	for _, want := range []string{
		markReconnect + " koe is restarting: sending it again in 0s (retry 1)\n",
		markReconnect + " koe is restarting: sending it again in 0s (retry 2)\n",
		markReconnect + " reconnected\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the chat showed:\n%s\nwithout %q", got, want)
		}
	}
	chats := front.requests()
	if len(chats) != 4 {
		t.Fatalf("%d chat requests, want 4 (one, two refused twice, two)", len(chats))
	}
	history := chats[1].HistoryUID
	if history == "" {
		t.Fatal("the second turn named no history: the chat did not keep the first one's")
	}
	for _, c := range chats[1:] {
		if c.HistoryUID != history || c.Message != "two" {
			t.Errorf("request %+v, want two again in history %s", c, history)
		}
	}

	// The connection breaks mid-reply.
	front.set(0, true)
	s.send("long story")
	got = s.waitFor(userPrompt)
	if want := markReconnect + " the connection to koe broke; the next message goes on in history " + history + "\n"; !strings.Contains(got, want) {
		t.Errorf("the chat showed:\n%s\nwithout %q", got, want)
	}
	s.send("three")
	s.waitFor("You said three.\n" + userPrompt)
	chats = front.requests()
	if last := chats[len(chats)-1]; last.HistoryUID != history || last.Message != "three" {
		t.Fatalf("the turn after the break: %+v, want it in history %s", last, history)
	}
	// koe had the whole conversation when it answered: the turns before
	// the refusal and the break are in what the LLM was sent.
	mu.Lock()
	defer mu.Unlock()
	var said []string
	for _, m := range seen[len(seen)-1] {
		if m.Role == "user" {
			said = append(said, lastLine(m.Content))
		}
	}
	if strings.Join(said, "|") != "one|two|long story|three" {
		t.Errorf("the last turn's LLM request had the user saying %q, want one, two, long story, three", said)
	}
}

// lastLine is what the user said in a user message koe may have put
// context before.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
