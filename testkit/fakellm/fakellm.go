// Package fakellm is a fake OpenAI-compatible chat-completions, speech,
// transcription and embeddings server.
//
// It speaks the real wire format (JSON bodies, SSE streaming, OpenAI-style
// error bodies) over real HTTP so that koe's tests and its load-test command
// exercise the same client code paths they use against a real provider,
// including failure modes that are hard to provoke on demand: HTTP errors,
// streams that break mid-way, and streams that never produce a token.
// POST /v1/audio/speech answers with deterministic synthetic speech (see
// speech.go) so text-to-speech clients can be tested the same way, and
// POST /v1/audio/transcriptions answers with a scripted transcript (see
// transcription.go) for speech-recognition clients. POST /v1/embeddings
// answers with deterministic bag-of-words vectors (see embeddings.go) for
// embedding clients and ranking tests.
//
// It is a test/benchmark tool, never a product path, but it is written to be
// safe against arbitrary input: malformed requests get OpenAI-style errors,
// never a panic, and every goroutine it starts stops on Close.
package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// ModelID is the only model listed by GET /v1/models. Chat requests may name
// any model; it is echoed back in responses, as OpenAI does.
const ModelID = "fake-model"

// maxBodyBytes bounds request bodies so a runaway client cannot make the
// server buffer unbounded memory. It is generous because image parts are
// usually inlined as base64 data URLs.
const maxBodyBytes = 64 << 20

// disconnectBuffer is the capacity of the Disconnects channel. Sends are
// non-blocking so a test that never drains it cannot wedge the server.
const disconnectBuffer = 1024

// Reply decides what the server answers to one request.
type Reply struct {
	// Tokens are the content deltas, streamed one per SSE chunk, or joined
	// into a single message for non-stream requests.
	Tokens []string
	// Interval is the delay before each chunk (simulates tokens/s); 0 means
	// as fast as possible. For non-stream requests the whole answer is
	// delayed by Interval*len(Tokens), as a real model would be.
	Interval time.Duration
	// Status, if != 0 and != 200, answers with this HTTP status and an
	// OpenAI-style JSON error body. Values that net/http cannot send as a
	// final status (below 200 or above 999) are answered as 500 instead.
	Status int
	// ErrorMessage is the message for the error body; defaults to the
	// status text.
	ErrorMessage string
	// BreakAfter, if > 0, abruptly closes the connection after this many
	// content chunks (no finish chunk, no [DONE]) to simulate a broken
	// stream. If it is >= len(Tokens) the break happens after the last
	// content chunk. For non-stream requests the connection is closed
	// without any response.
	BreakAfter int
	// Hang sends the response headers and then blocks until the client goes
	// away (or the server is closed).
	Hang bool
	// BeforeChunk, if set, is called right before content chunk i (0-based)
	// is written, e.g. to time what the client does with it.
	BeforeChunk func(i int)
	// Endless streams Tokens over and over until the client goes away: a
	// model that never emits its stop token. Streams only; a non-stream
	// request gets Tokens once.
	Endless bool
	// Body, if set, is the whole answer, sent with status 200 and
	// ContentType (default "text/plain; charset=utf-8") instead of a chat
	// completion: a server that is not OpenAI-compatible (a web page, a
	// proxy's notice) or a hand-made stream such as "data: [DONE]\n\n".
	Body        string
	ContentType string
	// Flood, if set, is the whole answer instead of all of the above: a
	// hostile or broken server's answer of any size (see Flood).
	Flood *Flood
	// ToolCalls are function calls the model makes after its Tokens. A
	// stream sends each as OpenAI does: a first fragment with the call's
	// index, id and name, then its arguments in several fragments; the
	// finish reason is then "tool_calls".
	ToolCalls []ToolCall
	// FinishReason, if set, is the stream's finish reason instead of
	// "stop" or "tool_calls" ("length": the model hit its token limit).
	FinishReason string
}

// ToolCall is one function call of a Reply, or of an assistant message
// the server received.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON
}

// AlternationError is what llama.cpp answers (HTTP 400) when the model's
// chat template (Mistral, Llama 2, Gemma…) refuses a conversation whose
// roles do not alternate; see SetStrictRoles.
const AlternationError = "Conversation roles must alternate user/assistant/user/assistant/..."

// Request is what the server received, decoded.
type Request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []Message `json:"messages"`
	// Tools are the names of the functions offered, in order.
	Tools []string `json:"tools,omitempty"`
	// ToolChoice is the tool_choice sent: "" when absent, "none", "auto",
	// "required", or the raw JSON of a named choice.
	ToolChoice string `json:"tool_choice,omitempty"`
	// Raw is the raw request body, for assertions on fields not decoded here.
	Raw    []byte      `json:"-"`
	Header http.Header `json:"-"`
}

// Message is one chat message. OpenAI allows content to be a string or an
// array of parts; for arrays the text parts are joined with "\n" into Content
// and image parts are counted in Images.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Images  int    `json:"images,omitempty"`
	// ToolCalls are an assistant message's calls; ToolCallID and Name are
	// a tool result's.
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// Server is a running fake. Create it with Start and stop it with Close.
type Server struct {
	ln      net.Listener
	srv     *http.Server
	respond func(Request) Reply
	url     string

	// done is closed by Close before the http.Server is shut down so that
	// handlers can tell "server going away" from "client went away" and only
	// report the latter on disconnects.
	done        chan struct{}
	serveDone   chan struct{}
	disconnects chan struct{}
	seq         atomic.Int64
	flooded     atomic.Int64 // bytes of Flood answers written
	resetReused atomic.Bool  // set by SetResetReused
	resets      atomic.Int64 // requests answered with a reset

	mu          sync.Mutex
	closed      bool
	noRecord    bool // set by SetRecording(false); long load tests would otherwise grow without bound
	strictRoles bool // set by SetStrictRoles
	requests    []Request
	active      int
	hanging     int // requests whose headers are sent and that hang
	// speechRespond is nil for the default speech behaviour.
	speechRespond  func(SpeechRequest) SpeechReply
	speechRequests []SpeechRequest
	// transcriptionRespond is nil for the default transcription behaviour.
	transcriptionRespond  func(TranscriptionRequest) TranscriptionReply
	transcriptionRequests []TranscriptionRequest
	// embeddingRespond is nil for the default embedding behaviour.
	embeddingRespond  func(EmbeddingRequest) EmbeddingReply
	embeddingRequests []EmbeddingRequest
	// handlers tracks in-flight handlers so Close can wait for them.
	// Add is only called under mu while !closed, and Wait only after closed
	// is set, which is the ordering sync.WaitGroup requires.
	handlers sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Start listens on addr (use "127.0.0.1:0" in tests) and serves in a
// goroutine it owns until Close. A nil respond answers every request with an
// empty reply.
func Start(addr string, respond func(Request) Reply) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakellm: listen %s: %w", addr, err)
	}
	if respond == nil {
		respond = func(Request) Reply { return Reply{} }
	}
	s := &Server{
		ln:          ln,
		respond:     respond,
		url:         "http://" + ln.Addr().String() + "/v1",
		done:        make(chan struct{}),
		serveDone:   make(chan struct{}),
		disconnects: make(chan struct{}, disconnectBuffer),
	}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(s.route),
		// Guards against clients that open a connection and never send a
		// request. No write timeout: streams are long-lived by design.
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext:       withConnServed,
	}
	go func() {
		defer close(s.serveDone)
		// Serve always returns a non-nil error; after Close it is
		// http.ErrServerClosed, and any other error also means the listener
		// is gone, so there is nothing useful to do with it.
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL returns the base URL including /v1, suitable for an OpenAI client's
// BaseURL, e.g. "http://127.0.0.1:41234/v1".
func (s *Server) URL() string { return s.url }

// Close stops the server, closes active connections (so hanging streams end),
// and waits for the serve goroutine and all handlers to return. It is
// safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		// Signal handlers first so that the context cancellations caused by
		// closing their connections are not reported as client disconnects.
		close(s.done)
		s.closeErr = s.srv.Close()
		<-s.serveDone
		s.handlers.Wait()
	})
	return s.closeErr
}

// Requests returns copies of all chat requests received so far, in arrival
// order. Requests whose body could not be decoded are not recorded.
func (s *Server) Requests() []Request { return recorded(s, &s.requests) }

// SetRecording turns request recording on (the default) or off. The load-test
// command turns it off because Requests keeps every body and a long run would
// otherwise grow memory without bound. Turning it off also drops what was
// recorded so far.
func (s *Server) SetRecording(enabled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noRecord = !enabled
	if !enabled {
		s.requests = nil
		s.speechRequests = nil
		s.transcriptionRequests = nil
		s.embeddingRequests = nil
	}
}

// SetStrictRoles makes the server behave like llama.cpp serving a model
// whose chat template requires alternating roles: a chat request is refused
// with HTTP 400 and AlternationError unless it holds at most one system
// message, first, and then user and assistant messages alternating,
// starting with a user message. An assistant message with tool calls, its
// tool results and the assistant message after them are one assistant
// side; a tool result must follow a tool call or another result. Refused
// requests are recorded too.
func (s *Server) SetStrictRoles(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strictRoles = on
}

// Disconnects receives a value each time a response ended because the client
// went away before it finished (request context cancelled or a write
// failed). Tests use it to prove that cancelling a turn closed the HTTP
// stream. Server shutdown is not reported.
func (s *Server) Disconnects() <-chan struct{} { return s.disconnects }

// Active returns the number of chat, speech, transcription and embedding
// requests currently being served.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// Hanging returns the number of requests answered with Hang whose headers
// have been sent and which now wait for the client to go away.
func (s *Server) Hanging() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hanging
}

// WaitActive waits at most within until a request is being served, and
// reports whether one is. Tests call it before they cancel a request or
// close the server, so that it hits a request in flight.
func (s *Server) WaitActive(within time.Duration) bool {
	deadline := time.Now().Add(within)
	for s.Active() == 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

func (r Request) clone() Request {
	c := r
	c.Messages = append([]Message(nil), r.Messages...)
	c.Tools = append([]string(nil), r.Tools...)
	c.Raw = append([]byte(nil), r.Raw...)
	c.Header = r.Header.Clone()
	return c
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if s.resetIfReused(w, r) {
		return
	}
	switch {
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.chat(w, r)
	case r.URL.Path == "/v1/audio/speech" && r.Method == http.MethodPost:
		s.speech(w, r)
	case r.URL.Path == "/v1/audio/transcriptions" && r.Method == http.MethodPost:
		s.transcription(w, r)
	case r.URL.Path == "/v1/embeddings" && r.Method == http.MethodPost:
		s.embeddings(w, r)
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, modelList{
			Object: "list",
			Data:   []model{{ID: ModelID, Object: "model", Created: 0, OwnedBy: "fakellm"}},
		})
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("Unknown request URL: %s %s", r.Method, r.URL.Path))
	}
}

// begin registers a chat, speech, transcription or embedding handler. Once Close has
// started it answers 503 itself and fails, so that handlers.Add never races
// with handlers.Wait.
func (s *Server) begin(w http.ResponseWriter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		writeError(w, http.StatusServiceUnavailable, "fakellm: server is shutting down")
		return false
	}
	s.active++
	s.handlers.Add(1)
	return true
}

func (s *Server) end() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	s.handlers.Done()
}

// readBody reads a request body up to maxBodyBytes, answering the client
// itself when it cannot.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "could not read request body: "+err.Error())
		return nil, false
	}
	return body, true
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	if !s.begin(w) {
		return
	}
	defer s.end()

	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, wr, err := decodeRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	req.Header = r.Header.Clone()
	includeUsage := wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage

	s.mu.Lock()
	strict := s.strictRoles
	if strict && !alternating(wr.Messages) {
		if !s.noRecord {
			s.requests = append(s.requests, req.clone())
		}
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, AlternationError)
		return
	}
	s.mu.Unlock()

	reply, err := answer(s, &s.requests, &s.respond, "responder", req)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}

	if reply.Flood != nil {
		(&call{s: s, w: w, ctx: r.Context()}).flood(reply.Flood)
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		writeFailure(w, reply.Status, reply.ErrorMessage)
		return
	}
	if reply.Body != "" {
		writeBody(w, reply.Body, reply.ContentType)
		return
	}

	id := fmt.Sprintf("chatcmpl-fake-%d", s.seq.Add(1))
	c := &call{s: s, w: w, ctx: r.Context(), reply: reply}
	if req.Stream {
		c.stream(id, req, includeUsage)
	} else {
		c.complete(id, req)
	}
}

// recordedRequest is a request type the server records. Recording keeps a
// copy, and so does every hand-out, so neither a responder nor a test can
// change what another sees.
type recordedRequest[R any] interface{ clone() R }

// answer records req (unless recording is off) and asks the endpoint's
// responder what to reply. The responder is read under mu because the Set
// methods may change it concurrently; nil means the zero reply, the
// endpoint's default. A panicking responder becomes an error, named by what,
// that the handler answers with a 500 the test can see, instead of an
// aborted connection that looks like a network failure.
func answer[R recordedRequest[R], A any](s *Server, log *[]R, respond *func(R) A, what string, req R) (reply A, err error) {
	s.mu.Lock()
	if !s.noRecord {
		*log = append(*log, req.clone())
	}
	f := *respond
	s.mu.Unlock()
	if f == nil {
		return reply, nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("fakellm: %s panicked: %v", what, p)
		}
	}()
	return f(req.clone()), nil
}

// recorded returns copies of the requests in *log, in arrival order.
func recorded[R recordedRequest[R]](s *Server, log *[]R) []R {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]R, len(*log))
	for i, r := range *log {
		out[i] = r.clone()
	}
	return out
}

// heldReply is a speech, transcription or embedding reply: before
// anything else it may hang, wait, or fail with an error status.
type heldReply interface {
	held() (hang bool, delay time.Duration, status int, errorMessage string)
}

// answerHeld is answer for the endpoints whose replies are heldReply: it
// also plays out the hang or delay (a hang sends contentType) and the error
// status. ok is false when that ended the response; otherwise c writes the
// rest.
func answerHeld[R recordedRequest[R], A heldReply](s *Server, w http.ResponseWriter, r *http.Request, log *[]R, respond *func(R) A, what string, req R, contentType string) (reply A, c *call, ok bool) {
	reply, err := answer(s, log, respond, what, req)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return reply, nil, false
	}
	hang, delay, status, msg := reply.held()
	c = &call{s: s, w: w, ctx: r.Context()}
	if !c.hold(hang, delay, contentType) {
		return reply, nil, false
	}
	if status != 0 && status != http.StatusOK {
		writeFailure(w, status, msg)
		return reply, nil, false
	}
	return reply, c, true
}

// writeBody answers with body as is: a server that is not OpenAI-compatible
// (contentType "" means plain text).
func writeBody(w http.ResponseWriter, body, contentType string) {
	if contentType == "" {
		contentType = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	// A failed write means the client left; there is no one to tell.
	_, _ = io.WriteString(w, body)
}

// writeFailure answers with the error status a reply asked for, and its
// message or else the status text.
func writeFailure(w http.ResponseWriter, status int, msg string) {
	if status < 200 || status > 999 {
		// net/http panics on codes outside 100..999 and treats 1xx as
		// informational (the real status would then be 200), so neither
		// can be honoured as an error status.
		status = http.StatusInternalServerError
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	writeError(w, status, msg)
}

// call is the state of one response being written.
type call struct {
	s     *Server
	w     http.ResponseWriter
	ctx   context.Context
	reply Reply
}

// outcome of waiting or writing.
type outcome int

const (
	proceed    outcome = iota
	clientGone         // the client disconnected; reported on Disconnects
	serverDone         // Close was called; not reported
)

// gone classifies why a response must stop, reporting client disconnects.
func (c *call) gone() outcome {
	select {
	case <-c.s.done:
		return serverDone
	default:
	}
	select {
	case c.s.disconnects <- struct{}{}:
	default:
	}
	return clientGone
}

// wait sleeps for d, but returns early (and reports why) if the client goes
// away or the server closes, so disconnects are noticed promptly rather than
// at the next write.
func (c *call) wait(d time.Duration) outcome {
	if d <= 0 {
		select {
		case <-c.s.done:
			return serverDone
		case <-c.ctx.Done():
			return c.gone()
		default:
			return proceed
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return proceed
	case <-c.s.done:
		return serverDone
	case <-c.ctx.Done():
		return c.gone()
	}
}

// hold plays out an audio reply's Hang or Delay and reports whether to go
// on and answer. Hang sends the headers (with contentType) and blocks until
// the client or the server goes away.
func (c *call) hold(hang bool, delay time.Duration, contentType string) bool {
	if hang {
		c.w.Header().Set("Content-Type", contentType)
		c.w.WriteHeader(http.StatusOK)
		if c.write(nil) == proceed {
			c.hang()
		}
		return false
	}
	return c.wait(delay) == proceed
}

// hang blocks until the client or the server goes away.
func (c *call) hang() {
	c.s.mu.Lock()
	c.s.hanging++
	c.s.mu.Unlock()
	defer func() {
		c.s.mu.Lock()
		c.s.hanging--
		c.s.mu.Unlock()
	}()
	select {
	case <-c.s.done:
	case <-c.ctx.Done():
		c.gone()
	}
}

// write sends one piece of the body and flushes it so the client sees it
// immediately; a failure means the client is gone.
func (c *call) write(p []byte) outcome {
	if _, err := c.w.Write(p); err != nil {
		return c.gone()
	}
	if err := http.NewResponseController(c.w).Flush(); err != nil {
		return c.gone()
	}
	return proceed
}

// breakConn closes the underlying connection without finishing the HTTP
// response, so the client sees a truncated body (an unexpected EOF inside
// the chunked encoding), like a proxy or provider dropping the stream.
func (c *call) breakConn() {
	conn, _, err := http.NewResponseController(c.w).Hijack()
	if err != nil {
		// Only possible for HTTP/2 or an already-hijacked connection, which
		// this server never produces. Returning ends the response early,
		// which is still observable as a stream without [DONE].
		return
	}
	_ = conn.Close()
}

func (c *call) stream(id string, req Request, includeUsage bool) {
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	c.w.WriteHeader(http.StatusOK)
	// Flush the headers now so that the client's request returns even if
	// the first token is slow (or never comes, with Hang).
	if c.write(nil) != proceed {
		return
	}
	if c.reply.Hang {
		c.hang()
		return
	}

	created := time.Now().Unix()
	role := "assistant"
	tokens := c.reply.Tokens
	for i := 0; i < len(tokens) || (c.reply.Endless && len(tokens) > 0); i++ {
		tok := tokens[i%len(tokens)]
		if c.reply.BreakAfter > 0 && i == c.reply.BreakAfter {
			c.breakConn()
			return
		}
		if c.wait(c.reply.Interval) != proceed {
			return
		}
		chunk := chunkFor(id, created, req.Model)
		chunk.Choices = []chunkChoice{{Delta: delta{Role: role, Content: tok}}}
		role = ""
		if c.reply.BeforeChunk != nil {
			c.reply.BeforeChunk(i)
		}
		if c.event(chunk) != proceed {
			return
		}
	}
	if c.reply.BreakAfter > 0 {
		c.breakConn()
		return
	}
	for i, tc := range c.reply.ToolCalls {
		for _, d := range toolCallFragments(i, tc) {
			if c.wait(c.reply.Interval) != proceed {
				return
			}
			chunk := chunkFor(id, created, req.Model)
			d.Role, role = role, ""
			chunk.Choices = []chunkChoice{{Delta: d}}
			if c.event(chunk) != proceed {
				return
			}
		}
	}

	stop := "stop"
	if len(c.reply.ToolCalls) > 0 {
		stop = "tool_calls"
	}
	if c.reply.FinishReason != "" {
		stop = c.reply.FinishReason
	}
	chunk := chunkFor(id, created, req.Model)
	// With no tokens at all the role still has to be announced once.
	chunk.Choices = []chunkChoice{{Delta: delta{Role: role}, FinishReason: &stop}}
	if c.event(chunk) != proceed {
		return
	}
	if includeUsage {
		chunk := chunkFor(id, created, req.Model)
		chunk.Choices = []chunkChoice{}
		u := usageFor(req, c.reply)
		chunk.Usage = &u
		if c.event(chunk) != proceed {
			return
		}
	}
	c.write([]byte("data: [DONE]\n\n"))
}

func (c *call) event(v any) outcome {
	b, err := json.Marshal(v)
	if err != nil {
		// Cannot happen for these plain structs; treat as a server fault
		// rather than sending a malformed event.
		return serverDone
	}
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	return c.write(buf)
}

func (c *call) complete(id string, req Request) {
	if c.reply.Hang {
		c.w.Header().Set("Content-Type", "application/json")
		c.w.WriteHeader(http.StatusOK)
		if c.write(nil) != proceed {
			return
		}
		c.hang()
		return
	}
	n := len(c.reply.Tokens)
	if c.reply.BreakAfter > 0 && c.reply.BreakAfter < n {
		n = c.reply.BreakAfter
	}
	// Simulate generation time in one wait so a disconnect is still noticed
	// immediately instead of after each token.
	if c.reply.Interval > 0 && n > 0 {
		if c.wait(c.reply.Interval*time.Duration(n)) != proceed {
			return
		}
	} else if c.wait(0) != proceed {
		return
	}
	if c.reply.BreakAfter > 0 {
		c.breakConn()
		return
	}
	stop := "stop"
	msg := completionMessage{Role: "assistant", Content: strings.Join(c.reply.Tokens, "")}
	for _, tc := range c.reply.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: tc.Arguments}})
		stop = "tool_calls"
	}
	writeJSON(c.w, http.StatusOK, completion{
		ID:      id,
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   req.Model,
		Choices: []completionChoice{{
			Message:      msg,
			FinishReason: &stop,
		}},
		Usage: usageFor(req, c.reply),
	})
}

// usageFor gives rough token counts: about four characters per prompt token
// and one completion token per delta, which is all a fake needs.
func usageFor(req Request, reply Reply) usage {
	chars := 0
	for _, m := range req.Messages {
		chars += utf8.RuneCountInString(m.Content)
	}
	p, c := chars/4, len(reply.Tokens)
	return usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}

// Wire types. They are unexported because callers should use a real OpenAI
// client to read them; they exist only to produce the exact JSON shape.

type chunkResp struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role      string         `json:"role,omitempty"`
	Content   string         `json:"content,omitempty"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

// wireToolCall is a tool call as sent: whole in a message, or a fragment
// in a stream's delta (Index set, the other fields only where they start).
type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// toolCallFragments splits call i into stream deltas the way OpenAI
// streams it: the id and name first with empty arguments, then the
// arguments in up to three pieces, cut on rune boundaries.
func toolCallFragments(i int, tc ToolCall) []delta {
	idx := i
	out := []delta{{ToolCalls: []wireToolCall{{Index: &idx, ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name}}}}}
	runes := []rune(tc.Arguments)
	step := max(1, (len(runes)+2)/3)
	for start := 0; start < len(runes); start += step {
		part := string(runes[start:min(len(runes), start+step)])
		out = append(out, delta{ToolCalls: []wireToolCall{{Index: &idx, Function: wireFunction{Arguments: part}}}})
	}
	return out
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   usage              `json:"usage"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	FinishReason *string           `json:"finish_reason"`
}

type completionMessage struct {
	Role      string         `json:"role"`
	Content   string         `json:"content"`
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func chunkFor(id string, created int64, model string) chunkResp {
	return chunkResp{ID: id, Object: "chat.completion.chunk", Created: created, Model: model}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"fakellm: encoding response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// A failed write means the client left; there is no one to tell.
	_, _ = w.Write(b)
}

// writeError sends an OpenAI-style error body, with type/code values that
// mirror what OpenAI returns for the common statuses so client code that
// branches on them behaves realistically.
func writeError(w http.ResponseWriter, status int, msg string) {
	typ, code := "server_error", ""
	switch {
	case status == http.StatusUnauthorized:
		typ, code = "invalid_request_error", "invalid_api_key"
	case status == http.StatusNotFound:
		typ, code = "invalid_request_error", "not_found"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status < 500:
		typ = "invalid_request_error"
	}
	body := apiError{Error: apiErrorBody{Message: msg, Type: typ}}
	if code != "" {
		body.Error.Code = &code
	}
	writeJSON(w, status, body)
}

// Request decoding. content is decoded lazily because OpenAI accepts either a
// string or an array of typed parts.

type wireRequest struct {
	Model    string        `json:"model"`
	Stream   bool          `json:"stream"`
	Messages []wireMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

type wirePart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func decodeRequest(body []byte) (Request, wireRequest, error) {
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return Request{}, wr, err
	}
	req := Request{
		Model:  wr.Model,
		Stream: wr.Stream,
		Raw:    body,
	}
	for _, t := range wr.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	if raw := strings.TrimSpace(string(wr.ToolChoice)); raw != "" && raw != "null" {
		var named string
		if json.Unmarshal(wr.ToolChoice, &named) == nil {
			req.ToolChoice = named
		} else {
			req.ToolChoice = raw
		}
	}
	for i, wm := range wr.Messages {
		m, err := decodeMessage(wm)
		if err != nil {
			return Request{}, wr, fmt.Errorf("messages[%d]: %w", i, err)
		}
		req.Messages = append(req.Messages, m)
	}
	return req, wr, nil
}

// alternating reports whether msgs suit a chat template that requires
// alternating roles (see SetStrictRoles).
func alternating(msgs []wireMessage) bool {
	side := "" // "user" or "assistant": whose side of the conversation it is
	plain := false
	for i, m := range msgs {
		switch m.Role {
		case "system":
			if i != 0 {
				return false
			}
		case "user":
			if side == "user" {
				return false
			}
			side, plain = "user", false
		case "assistant":
			if side == "" {
				return false
			}
			if side == "user" {
				side, plain = "assistant", false
			}
			if len(m.ToolCalls) == 0 {
				if plain {
					return false // two answers in a row
				}
				plain = true
			}
		case "tool":
			if i == 0 {
				return false
			}
			if prev := msgs[i-1]; prev.Role != "tool" && (prev.Role != "assistant" || len(prev.ToolCalls) == 0) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func decodeMessage(wm wireMessage) (Message, error) {
	m := Message{Role: wm.Role, ToolCallID: wm.ToolCallID, Name: wm.Name}
	for _, tc := range wm.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	raw := strings.TrimSpace(string(wm.Content))
	switch {
	case raw == "" || raw == "null":
		// Assistant messages carrying only tool calls have no content.
		return m, nil
	case raw[0] == '"':
		if err := json.Unmarshal(wm.Content, &m.Content); err != nil {
			return Message{}, err
		}
		return m, nil
	case raw[0] == '[':
		var parts []wirePart
		if err := json.Unmarshal(wm.Content, &parts); err != nil {
			return Message{}, err
		}
		var texts []string
		for _, p := range parts {
			switch p.Type {
			case "text", "input_text":
				texts = append(texts, p.Text)
			case "image_url", "input_image", "image":
				m.Images++
			}
		}
		m.Content = strings.Join(texts, "\n")
		return m, nil
	default:
		return Message{}, errors.New("content must be a string or an array of content parts")
	}
}

// Script answers the i-th request with replies[i], repeating the last one
// afterwards. With no replies it answers every request with an empty reply.
// It is safe for concurrent use.
func Script(replies ...Reply) func(Request) Reply {
	replies = append([]Reply(nil), replies...)
	var mu sync.Mutex
	next := 0
	return func(Request) Reply {
		mu.Lock()
		defer mu.Unlock()
		if len(replies) == 0 {
			return Reply{}
		}
		i := next
		if i >= len(replies) {
			i = len(replies) - 1
		} else {
			next++
		}
		return replies[i]
	}
}

// Words splits text into token-like deltas: each word keeps its leading
// whitespace ("Hello there." -> ["Hello", " there."]), punctuation stays
// attached to the word before it, and trailing whitespace becomes its own
// delta. Han, Hiragana and Katakana characters are emitted one per delta
// because those scripts have no spaces and a real tokenizer splits them
// finely. Concatenating the result always yields text exactly, even for
// invalid UTF-8.
func Words(text string) []string {
	var out []string
	start := 0
	hasWord := false // current delta already contains a non-space rune
	hasCJK := false  // current delta contains a CJK character
	prev := rune(-1)
	for i, r := range text {
		space := unicode.IsSpace(r)
		var cut bool
		switch {
		case space:
			cut = hasWord && !unicode.IsSpace(prev)
		case isCJK(r):
			cut = hasWord
		default:
			// Letters and digits after CJK text start a new word even
			// without a space ("好。Go"); punctuation stays attached.
			cut = hasCJK && (unicode.IsLetter(r) || unicode.IsDigit(r))
		}
		if cut {
			out = append(out, text[start:i])
			start = i
			hasWord, hasCJK = false, false
		}
		if !space {
			hasWord = true
		}
		if isCJK(r) {
			hasCJK = true
		}
		prev = r
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

// UserWords is what the user said last: the last paragraph of the last
// user message. koe puts what it adds to a user message (its persona, a
// note) above the user's words, a blank line apart.
func (r Request) UserWords() string {
	last := ""
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			last = r.Messages[i].Content
			break
		}
	}
	if i := strings.LastIndex(last, "\n\n"); i >= 0 {
		last = last[i+2:]
	}
	return last
}

// Echo replies "You said: <the user's words>." (see UserWords) as Words,
// with the given per-token interval.
func Echo(interval time.Duration) func(Request) Reply {
	return func(req Request) Reply {
		return Reply{Tokens: Words("You said: " + req.UserWords() + "."), Interval: interval}
	}
}
