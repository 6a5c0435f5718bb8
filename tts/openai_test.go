package tts

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"koe/internal/wavio"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

func openAIConfig(baseURL string) Config {
	cfg := DefaultConfig()
	cfg.Engine = EngineOpenAI
	cfg.Timeout = 0
	cfg.OpenAI.BaseURL = baseURL
	cfg.OpenAI.APIKey = "sk-test"
	return cfg
}

func newOpenAIEngine(t *testing.T, cfg Config) Engine {
	t.Helper()
	e, err := New(cfg, &http.Client{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func TestOpenAIFormats(t *testing.T) {
	s := fakellmtest.Start(t)
	text := "Hello from the fake speech server."
	for _, format := range []string{"wav", "pcm"} {
		cfg := openAIConfig(s.URL())
		cfg.OpenAI.Format = format
		a, err := newOpenAIEngine(t, cfg).Synthesize(testCtx(t), text)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		checkWAV(t, a)
		if a.SampleRate != 24000 || a.Duration != fakellm.SpeechDuration(text, 1) {
			t.Errorf("%s: %d Hz, %v; want 24000 Hz, %v", format, a.SampleRate, a.Duration, fakellm.SpeechDuration(text, 1))
		}
		v := Volumes(a.Samples, a.SampleRate, 20)
		if len(v) != int((a.Duration+20*time.Millisecond-1)/(20*time.Millisecond)) || v[0] == v[len(v)/2] && v[0] == v[len(v)-1] {
			t.Errorf("%s: %d volumes, flat? %v", format, len(v), v[:5])
		}
	}
}

func TestOpenAIRequestFields(t *testing.T) {
	s := fakellmtest.Start(t)
	cfg := openAIConfig(s.URL() + "/") // a trailing slash is tolerated
	cfg.OpenAI.Model, cfg.OpenAI.Voice, cfg.OpenAI.Speed = "kokoro", "af_bella", 1.5
	text := "-v --help: text stays text."
	a, err := newOpenAIEngine(t, cfg).Synthesize(testCtx(t), text)
	if err != nil {
		t.Fatal(err)
	}
	if a.Duration != fakellm.SpeechDuration(text, 1.5) {
		t.Errorf("duration %v, want %v at speed 1.5", a.Duration, fakellm.SpeechDuration(text, 1.5))
	}
	reqs := s.SpeechRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "kokoro" || r.Voice != "af_bella" || r.Speed != 1.5 || r.ResponseFormat != "wav" || r.Input != text {
		t.Errorf("request %+v", r)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}

	// Local servers need no key: then no Authorization header at all.
	cfg.OpenAI.APIKey = ""
	if _, err := newOpenAIEngine(t, cfg).Synthesize(testCtx(t), "hi"); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.SpeechRequests()[1].Header["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %q", got)
	}
}

func TestOpenAIHTTPErrors(t *testing.T) {
	s := fakellmtest.Start(t)
	e := newOpenAIEngine(t, openAIConfig(s.URL()))
	for _, tc := range []struct {
		reply fakellm.SpeechReply
		want  []string
	}{
		{fakellm.SpeechReply{Status: 401, ErrorMessage: "Incorrect API key provided"}, []string{"HTTP 401", "Incorrect API key provided", "tts.openai.api_key"}},
		{fakellm.SpeechReply{Status: 404}, []string{"HTTP 404", `"tts-1"`, "tts.openai.model", "/v1"}},
		{fakellm.SpeechReply{Status: 400, ErrorMessage: "voice nope"}, []string{"HTTP 400", "voice nope", "tts.openai.model", `"alloy"`}},
		{fakellm.SpeechReply{Status: 429}, []string{"HTTP 429", "rate limiting"}},
		{fakellm.SpeechReply{Status: 500, ErrorMessage: "model crashed"}, []string{"HTTP 500", "model crashed", "logs"}},
	} {
		s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply { return tc.reply })
		_, err := e.Synthesize(testCtx(t), "hello")
		if err == nil {
			t.Fatalf("%d: no error", tc.reply.Status)
		}
		for _, want := range append(tc.want, s.URL()) {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%d: error %q does not mention %q", tc.reply.Status, err, want)
			}
		}
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tc.reply.Status {
			t.Errorf("%d: go-openai's error is not wrapped: %v", tc.reply.Status, err)
		}
	}
}

func TestOpenAINonJSONError(t *testing.T) {
	// A reverse proxy in front of the speech server answers in HTML.
	page := "<html><body>" + strings.Repeat("Bad Gateway ", 100) + "</body></html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, page, http.StatusBadGateway)
	}))
	defer srv.Close()
	_, err := newOpenAIEngine(t, openAIConfig(srv.URL+"/v1")).Synthesize(testCtx(t), "hello")
	if err == nil || !strings.Contains(err.Error(), "HTTP 502") || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("err = %v", err)
	}
	if len(err.Error()) > 600 {
		t.Errorf("error quotes the whole page (%d bytes): %q", len(err.Error()), err)
	}
	var reqErr *openai.RequestError
	if !errors.As(err, &reqErr) {
		t.Errorf("go-openai's error is not wrapped")
	}
}

func TestOpenAIUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v1"
	ln.Close() // nothing listens there now
	_, err = newOpenAIEngine(t, openAIConfig(url)).Synthesize(testCtx(t), "hello")
	if err == nil || !strings.Contains(err.Error(), "cannot reach") || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "tts.openai.base_url") {
		t.Errorf("err = %v", err)
	}
}

func TestOpenAIBadAudio(t *testing.T) {
	s := fakellmtest.Start(t)
	e := newOpenAIEngine(t, openAIConfig(s.URL()))
	s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
		return fakellm.SpeechReply{Body: []byte("ID3\x04 this is an mp3")}
	})
	_, err := e.Synthesize(testCtx(t), "hello")
	if !errors.Is(err, ErrNotWAV) || !strings.Contains(err.Error(), "application/octet-stream") || !strings.Contains(err.Error(), s.URL()) {
		t.Errorf("err = %v", err)
	}
	// A server that streams its WAV (placeholder sizes) is fine.
	streamed := wavBytes(u32(0xffffffff), fmtChunk(wavio.FormatPCM, 1, 24000, 16), chunk{id: "data", body: pcmBytes(sine(2400, 24000, 200, 0.5), 16), size: u32(0xffffffff)})
	s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply { return fakellm.SpeechReply{Body: streamed} })
	a, err := e.Synthesize(testCtx(t), "hello")
	if err != nil || a.Duration != 100*time.Millisecond {
		t.Errorf("streamed WAV: %v, %v", err, a.Duration)
	}
}

func TestOpenAIEmptyText(t *testing.T) {
	s := fakellmtest.Start(t)
	if _, err := newOpenAIEngine(t, openAIConfig(s.URL())).Synthesize(testCtx(t), " \n "); err == nil {
		t.Error("no error for empty text")
	}
	if n := len(s.SpeechRequests()); n != 0 {
		t.Errorf("empty text was sent: %d requests", n)
	}
}

// TestOpenAICancel cancels a request before the server answers (Delay,
// longer than the test's guard) and while the body is being read (Hang
// sends headers, then nothing). Each step waits for the event it needs,
// never for time.
func TestOpenAICancel(t *testing.T) {
	for name, reply := range map[string]fakellm.SpeechReply{
		"before headers": {Delay: time.Hour},
		"reading body":   {Hang: true},
	} {
		s := fakellmtest.Start(t)
		reached, headers := fakellmtest.Signal(), fakellmtest.Signal()
		s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
			fakellmtest.Notify(reached)
			return reply
		})
		e, err := New(openAIConfig(s.URL()), fakellmtest.HeadersClient(t, headers))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(testCtx(t))
		errc := make(chan error, 1)
		go func() {
			_, err := e.Synthesize(ctx, "hello")
			errc <- err
		}()
		if reply.Hang {
			fakellmtest.WaitFor(t, headers, name+": the response headers")
		} else {
			fakellmtest.WaitFor(t, reached, name+": the request reaching the server")
		}
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: err = %v, want context.Canceled", name, err)
			}
		case <-time.After(fakellmtest.HangGuard):
			t.Fatalf("%s: Synthesize did not return within %v of the cancel", name, fakellmtest.HangGuard)
		}
		fakellmtest.WaitDisconnect(t, s)
	}
}

// TestOpenAITimeout lets tts.timeout end a request the server holds. The
// server can only see the client leave if the request reached it first;
// on a machine so loaded that it did not within the timeout, the test
// tries again with twice the timeout.
func TestOpenAITimeout(t *testing.T) {
	var s *fakellm.Server
	for limit := 100 * time.Millisecond; ; limit *= 2 {
		if limit > fakellmtest.HangGuard {
			t.Fatalf("no request reached the server within tts.timeout, up to %v", limit/2)
		}
		s = fakellmtest.Start(t)
		reached := fakellmtest.Signal()
		s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
			fakellmtest.Notify(reached)
			return fakellm.SpeechReply{Hang: true}
		})
		cfg := openAIConfig(s.URL())
		cfg.Timeout = limit
		_, err := newOpenAIEngine(t, cfg).Synthesize(testCtx(t), "hello")
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "tts.timeout") {
			t.Fatalf("err = %v, want DeadlineExceeded naming tts.timeout", err)
		}
		select {
		case <-reached:
			fakellmtest.WaitDisconnect(t, s)
		default:
			t.Logf("the request had not reached the server when tts.timeout (%v) ended it; trying %v", limit, 2*limit)
			continue
		}
		break
	}

	// The caller's own deadline is reported as is, not as tts.timeout.
	cfg := openAIConfig(s.URL())
	cfg.Timeout = time.Hour
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	_, err := newOpenAIEngine(t, cfg).Synthesize(ctx, "hello")
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "tts.timeout") {
		t.Errorf("caller deadline: err = %v", err)
	}
}

// TestTimeoutWrapsForeignErrors checks that a timed-out synthesis always
// wraps DeadlineExceeded, even if an engine describes the abort its own way.
func TestTimeoutWrapsForeignErrors(t *testing.T) {
	e := timeoutEngine{next: engineFunc(func(ctx context.Context, _ string) (Audio, error) {
		<-ctx.Done()
		return Audio{}, errors.New("engine gave up")
	}), limit: 10 * time.Millisecond}
	_, err := e.Synthesize(context.Background(), "x")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "engine gave up") {
		t.Errorf("err = %v", err)
	}
}

type engineFunc func(context.Context, string) (Audio, error)

func (f engineFunc) Synthesize(ctx context.Context, text string) (Audio, error) { return f(ctx, text) }
