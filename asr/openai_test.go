package asr

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

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

// utterance is a short WAV; the fake does not decode it.
var utterance = pcmWAV([]int16{0, 1000, -1000, 2000, -2000, 0}, 16000, 1)

func TestOpenAITranscribe(t *testing.T) {
	s := fakellmtest.Start(t)
	e := newOpenAIEngine(t, openAIConfig(s.URL()))
	text, err := e.Transcribe(asrCtx(t), utterance)
	if err != nil || text != fakellm.DefaultTranscription {
		t.Fatalf("Transcribe = %q, %v", text, err)
	}
	// Whisper servers pad transcripts with spaces and newlines.
	s.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		return fakellm.TranscriptionReply{Text: " \n What time is it?\n"}
	})
	if text, err := e.Transcribe(asrCtx(t), utterance); err != nil || text != "What time is it?" {
		t.Errorf("padded transcript: %q, %v", text, err)
	}
	// Silence: an empty transcript is a result, not an error.
	s.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		return fakellm.TranscriptionReply{Empty: true}
	})
	if text, err := e.Transcribe(asrCtx(t), utterance); err != nil || text != "" {
		t.Errorf("empty transcript: %q, %v", text, err)
	}
	if _, err := e.Transcribe(asrCtx(t), nil); !errors.Is(err, ErrNoAudio) {
		t.Errorf("no audio: err = %v, want ErrNoAudio", err)
	}
	if n := len(s.TranscriptionRequests()); n != 3 {
		t.Errorf("%d requests, want 3 (none for the empty input)", n)
	}
}

func TestOpenAIRequestFields(t *testing.T) {
	s := fakellmtest.Start(t)
	cfg := openAIConfig(s.URL() + "/") // a trailing slash is tolerated
	cfg.OpenAI.Model, cfg.OpenAI.Language, cfg.OpenAI.Prompt = "large-v3", "de", "Koe, Live2D, Ollama."
	if _, err := newOpenAIEngine(t, cfg).Transcribe(asrCtx(t), utterance); err != nil {
		t.Fatal(err)
	}
	reqs := s.TranscriptionRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "large-v3" || r.Language != "de" || r.Prompt != "Koe, Live2D, Ollama." || r.ResponseFormat != "json" || r.Filename != "audio.wav" {
		t.Errorf("request %+v", r)
	}
	if r.AudioBytes != len(utterance) || !bytes.Equal(r.Audio, utterance) {
		t.Errorf("server got %d audio bytes, want the %d of the WAV unchanged", r.AudioBytes, len(utterance))
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}

	// Optional fields stay out of the form; local servers need no key.
	cfg.OpenAI.APIKey, cfg.OpenAI.Language, cfg.OpenAI.Prompt = "", "", ""
	if _, err := newOpenAIEngine(t, cfg).Transcribe(asrCtx(t), utterance); err != nil {
		t.Fatal(err)
	}
	r = s.TranscriptionRequests()[1]
	if r.Language != "" || r.Prompt != "" {
		t.Errorf("empty optional fields sent: %+v", r)
	}
	if got, ok := r.Header["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %q", got)
	}
}

func TestOpenAIHTTPErrors(t *testing.T) {
	s := fakellmtest.Start(t)
	e := newOpenAIEngine(t, openAIConfig(s.URL()))
	for _, tc := range []struct {
		reply fakellm.TranscriptionReply
		want  []string
	}{
		{fakellm.TranscriptionReply{Status: 401, ErrorMessage: "Incorrect API key provided"}, []string{"HTTP 401", "Incorrect API key provided", "asr.openai.api_key"}},
		{fakellm.TranscriptionReply{Status: 404}, []string{"HTTP 404", `"whisper-1"`, "asr.openai.model", "/v1"}},
		{fakellm.TranscriptionReply{Status: 400, ErrorMessage: "unsupported language"}, []string{"HTTP 400", "unsupported language", "asr.openai.model", "language"}},
		{fakellm.TranscriptionReply{Status: 413}, []string{"HTTP 413", "too large"}},
		{fakellm.TranscriptionReply{Status: 429}, []string{"HTTP 429", "rate limiting"}},
		{fakellm.TranscriptionReply{Status: 500, ErrorMessage: "CUDA out of memory"}, []string{"HTTP 500", "CUDA out of memory", "logs"}},
	} {
		s.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply { return tc.reply })
		_, err := e.Transcribe(asrCtx(t), utterance)
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
	// A reverse proxy in front of the Whisper server answers in HTML.
	page := "<html><body>" + strings.Repeat("Bad Gateway ", 100) + "</body></html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, page, http.StatusBadGateway)
	}))
	defer srv.Close()
	_, err := newOpenAIEngine(t, openAIConfig(srv.URL+"/v1")).Transcribe(asrCtx(t), utterance)
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
	_, err = newOpenAIEngine(t, openAIConfig(url)).Transcribe(asrCtx(t), utterance)
	if err == nil || !strings.Contains(err.Error(), "cannot reach") || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "asr.openai.base_url") {
		t.Errorf("err = %v", err)
	}
}

// TestOpenAICancel cancels a request while the server thinks (Delay,
// longer than the test's guard) and while the client reads the body (Hang
// sends the headers, then nothing). Each step waits for the event it
// needs, never for time.
func TestOpenAICancel(t *testing.T) {
	for name, reply := range map[string]fakellm.TranscriptionReply{
		"before headers": {Delay: time.Hour},
		"reading body":   {Hang: true},
	} {
		s := fakellmtest.Start(t)
		reached, headers := fakellmtest.Signal(), fakellmtest.Signal()
		s.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
			fakellmtest.Notify(reached)
			return reply
		})
		e, err := New(openAIConfig(s.URL()), fakellmtest.HeadersClient(t, headers))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(asrCtx(t))
		errc := make(chan error, 1)
		go func() {
			_, err := e.Transcribe(ctx, utterance)
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
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), s.URL()) {
				t.Errorf("%s: err = %v, want context.Canceled naming the server", name, err)
			}
		case <-time.After(fakellmtest.HangGuard):
			t.Fatalf("%s: Transcribe did not return within %v of the cancel", name, fakellmtest.HangGuard)
		}
		fakellmtest.WaitDisconnect(t, s)
	}
}

// TestOpenAITimeout lets asr.timeout end a request the server holds. The
// server can only see the client leave if the request reached it first;
// on a machine so loaded that it did not within the timeout, the test
// tries again with twice the timeout.
func TestOpenAITimeout(t *testing.T) {
	var s *fakellm.Server
	for limit := 100 * time.Millisecond; ; limit *= 2 {
		if limit > fakellmtest.HangGuard {
			t.Fatalf("no request reached the server within asr.timeout, up to %v", limit/2)
		}
		s = fakellmtest.Start(t)
		reached := fakellmtest.Signal()
		s.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
			fakellmtest.Notify(reached)
			return fakellm.TranscriptionReply{Hang: true}
		})
		cfg := openAIConfig(s.URL())
		cfg.Timeout = limit
		_, err := newOpenAIEngine(t, cfg).Transcribe(asrCtx(t), utterance)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "asr.timeout") {
			t.Fatalf("err = %v, want DeadlineExceeded naming asr.timeout", err)
		}
		select {
		case <-reached:
			fakellmtest.WaitDisconnect(t, s)
		default:
			t.Logf("the request had not reached the server when asr.timeout (%v) ended it; trying %v", limit, 2*limit)
			continue
		}
		break
	}

	// A deadline the caller set is the caller's, not asr.timeout's.
	cfg := openAIConfig(s.URL())
	cfg.Timeout = time.Hour
	e := newOpenAIEngine(t, cfg)
	ctx, cancel := context.WithTimeout(asrCtx(t), 50*time.Millisecond)
	defer cancel()
	_, err := e.Transcribe(ctx, utterance)
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "asr.timeout") {
		t.Errorf("caller deadline: err = %v", err)
	}
}

func TestOpenAIWithoutHTTPClient(t *testing.T) {
	s := fakellmtest.Start(t)
	e, err := New(openAIConfig(s.URL()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Transcribe(asrCtx(t), utterance); err != nil {
		t.Errorf("nil http.Client: %v", err)
	}
}

// TestTranscribeTimeoutWrapsForeignErrors checks that a timed-out
// transcription always wraps DeadlineExceeded, even if an engine describes
// the abort its own way.
func TestTranscribeTimeoutWrapsForeignErrors(t *testing.T) {
	e := timeoutEngine{next: engineFunc(func(ctx context.Context, _ []byte) (string, error) {
		<-ctx.Done()
		return "", errors.New("engine gave up")
	}), limit: 10 * time.Millisecond}
	_, err := e.Transcribe(context.Background(), utterance)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "engine gave up") || !strings.Contains(err.Error(), "asr.timeout") {
		t.Errorf("err = %v", err)
	}
}

type engineFunc func(context.Context, []byte) (string, error)

func (f engineFunc) Transcribe(ctx context.Context, wav []byte) (string, error) { return f(ctx, wav) }
