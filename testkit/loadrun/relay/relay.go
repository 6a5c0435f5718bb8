// Package relay is the floor koe-load measures koe against: the thinnest
// server that plays one OLV text turn in the same stack as koe (Fiber,
// gofiber/contrib/websocket, go-openai). For each text-input it streams a
// chat completion, cuts a piece at every `.`, `,`, `!` or `?` as soon as the
// delta that carries it arrives and sends it as a text-only audio frame, then
// backend-synth-complete, waits for frontend-playback-complete and ends the
// chain. It keeps no memory, no history and counts no tokens.
//
// It is a benchmark tool, never a product path: the difference between koe
// and this relay, measured in one run against the same fake LLM, is what koe
// itself costs.
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/sashabaranov/go-openai"

	"koe/protocol"
)

// Options configure a relay. The zero values of the limits take the
// defaults below.
type Options struct {
	// LLMBaseURL is the OpenAI-compatible API's base URL (…/v1).
	LLMBaseURL string
	Model      string
	APIKey     string
	// HTTPClient carries the LLM requests; nil: a pool shaped like koe's
	// (up to 64 idle connections to the LLM), so connection reuse is not
	// what differs between the two.
	HTTPClient *http.Client
	// PlaybackTimeout bounds the wait for frontend-playback-complete, as
	// koe's conversation.playback_timeout does.
	PlaybackTimeout time.Duration
	// WriteTimeout bounds one frame's write to a client that stopped reading.
	WriteTimeout time.Duration
	// MaxFrameBytes is the largest frame read from a client.
	MaxFrameBytes int64
}

const (
	defaultPlaybackTimeout = 20 * time.Second
	defaultWriteTimeout    = 10 * time.Second
	defaultMaxFrameBytes   = 1 << 20
)

// pieceEnds are the marks that end a piece. The relay cuts at them at
// once, without looking at what follows: the floor for first audio.
const pieceEnds = ".,!?"

// Relay is a running relay. Close it.
type Relay struct {
	opts   Options
	llm    *openai.Client
	app    *fiber.App
	ln     net.Listener
	served chan error // Listener's result, once it returns
	// base ends every connection's turn when the relay closes.
	base   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	open   map[*websocket.Conn]struct{}
	nextID atomic.Uint64
}

// Start listens on addr (host:port; port 0 picks a free one) and serves
// /client-ws until Close.
func Start(addr string, o Options) (*Relay, error) {
	if o.LLMBaseURL == "" {
		return nil, errors.New("relay: the LLM base URL is empty")
	}
	if o.PlaybackTimeout <= 0 {
		o.PlaybackTimeout = defaultPlaybackTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = defaultMaxFrameBytes
	}
	if o.HTTPClient == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxIdleConnsPerHost = 64
		o.HTTPClient = &http.Client{Transport: transport}
	}
	oc := openai.DefaultConfig(o.APIKey)
	oc.BaseURL = strings.TrimSuffix(o.LLMBaseURL, "/")
	oc.HTTPClient = o.HTTPClient

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("relay: listen on %s: %w", addr, err)
	}
	base, stop := context.WithCancel(context.Background())
	r := &Relay{
		opts:   o,
		llm:    openai.NewClientWithConfig(oc),
		ln:     ln,
		served: make(chan error, 1),
		base:   base,
		stop:   stop,
		open:   map[*websocket.Conn]struct{}{},
	}
	r.app = fiber.New(fiber.Config{DisableStartupMessage: true, AppName: "koe-load relay"})
	r.app.Get("/client-ws", websocket.New(r.serve, websocket.Config{
		Subprotocols: []string{protocol.Subprotocol},
	}))
	// The listener's goroutine ends when Close shuts the app down.
	go func() { r.served <- r.app.Listener(ln) }()
	return r, nil
}

// Addr is the address the relay listens on.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// URL is the WebSocket endpoint, ws://ADDR/client-ws.
func (r *Relay) URL() string { return "ws://" + r.Addr() + "/client-ws" }

// Done delivers the listener's error if it stops before Close.
func (r *Relay) Done() <-chan error { return r.served }

// Close ends every turn, closes the connections and stops listening.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	// fasthttp does not close hijacked connections and ignores their
	// Close until the handler returns; an expired read deadline ends each
	// read loop (net.Conn deadlines may be set from any goroutine).
	for c := range r.open {
		_ = c.NetConn().SetReadDeadline(time.Now())
	}
	r.mu.Unlock()
	r.stop()
	err := r.app.ShutdownWithTimeout(5 * time.Second)
	r.wg.Wait()
	return err
}

// serve is one connection: its goroutine reads, and the running turn's
// goroutine is the only writer after the greeting, so no lock guards the
// socket.
func (r *Relay) serve(c *websocket.Conn) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	r.open[c] = struct{}{}
	r.mu.Unlock()
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.open, c)
		r.mu.Unlock()
	}()

	ctx, cancel := context.WithCancel(r.base)
	defer cancel()
	c.SetReadLimit(r.opts.MaxFrameBytes)
	s := &session{
		relay:  r,
		ws:     c,
		tokens: c.Subprotocol() == protocol.Subprotocol || c.Query("koe") == "1",
		played: make(chan struct{}, 1),
	}
	if err := s.greet(strconv.FormatUint(r.nextID.Add(1), 10)); err != nil {
		return
	}
	// The turn writes to c, which fiber recycles once serve returns: wait
	// for it on every way out.
	var turnDone chan struct{}
	defer func() {
		cancel()
		if turnDone != nil {
			<-turnDone
		}
	}()
	for {
		kind, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		if kind != websocket.TextMessage {
			continue
		}
		var in struct{ Type, Text string }
		if json.Unmarshal(data, &in) != nil {
			continue
		}
		switch in.Type {
		case protocol.TypeTextInput:
			if turnDone != nil && !isClosed(turnDone) {
				if !s.ending.Load() {
					continue // one turn at a time; a floor needs no queue
				}
				// The client has its chain-end and the turn is about to
				// return: this is the next turn, not an overlap.
				<-turnDone
			}
			s.ending.Store(false)
			select {
			case <-s.played: // left over from a turn that timed out
			default:
			}
			done := make(chan struct{})
			turnDone = done
			go func() {
				defer close(done)
				s.turn(ctx, in.Text)
			}()
		case protocol.TypeFrontendPlaybackComplete:
			select {
			case s.played <- struct{}{}:
			default:
			}
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

type session struct {
	relay  *Relay
	ws     *websocket.Conn
	tokens bool          // the client asked for koe's token frames
	played chan struct{} // frontend-playback-complete arrived
	ending atomic.Bool   // the turn is past its wait and sends its last frames
}

func (s *session) send(msg any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %T: %w", msg, err)
	}
	_ = s.ws.SetWriteDeadline(time.Now().Add(s.relay.opts.WriteTimeout))
	return s.ws.WriteMessage(websocket.TextMessage, data)
}

// greet sends OLV's connect sequence, the five frames a client waits for.
func (s *session) greet(clientUID string) error {
	group := protocol.GroupUpdate{Type: protocol.TypeGroupUpdate, Members: []string{}}
	for _, msg := range []any{
		group,
		protocol.FullText(protocol.ConnectionEstablished),
		protocol.SetModelAndConf{Type: protocol.TypeSetModelAndConf, ModelInfo: map[string]any{},
			ConfName: "relay", ConfUID: "relay", ClientUID: clientUID},
		group,
		protocol.Control(protocol.ControlStartMic),
	} {
		if err := s.send(msg); err != nil {
			return err
		}
	}
	return nil
}

// turn plays one text turn. A write error ends it: the socket is gone.
func (s *session) turn(ctx context.Context, text string) {
	if s.send(protocol.Control(protocol.ControlChainStart)) != nil ||
		s.send(protocol.FullText(protocol.ThinkingText)) != nil {
		return
	}
	if err := s.stream(ctx, text); err != nil {
		if ctx.Err() != nil {
			return
		}
		_ = s.send(protocol.NewError("LLM: " + err.Error()))
	}
	if s.send(protocol.Simple{Type: protocol.TypeBackendSynthComplete}) != nil {
		return
	}
	t := time.NewTimer(s.relay.opts.PlaybackTimeout)
	defer t.Stop()
	select {
	case <-s.played:
	case <-t.C:
	case <-ctx.Done():
		return
	}
	s.ending.Store(true)
	if s.send(protocol.Simple{Type: protocol.TypeForceNewMessage}) != nil {
		return
	}
	_ = s.send(protocol.Control(protocol.ControlChainEnd))
}

// stream forwards the reply: each delta as a token frame (to clients that
// asked), each piece as a silent audio frame.
func (s *session) stream(ctx context.Context, text string) error {
	st, err := s.relay.llm.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Model:    s.relay.opts.Model,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
		Stream:   true,
	})
	if err != nil {
		return err
	}
	defer st.Close()
	var pending strings.Builder
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(resp.Choices) == 0 {
			continue
		}
		delta := resp.Choices[0].Delta.Content
		if delta == "" {
			continue
		}
		if s.tokens {
			if err := s.send(protocol.Token{Type: protocol.TypeToken, Content: delta}); err != nil {
				return err
			}
		}
		pending.WriteString(delta)
		if i := strings.LastIndexAny(delta, pieceEnds); i >= 0 {
			// The mark is in this delta, so the piece ends in pending at
			// the same distance from its end.
			all := pending.String()
			cut := len(all) - len(delta) + i + 1
			if err := s.piece(all[:cut]); err != nil {
				return err
			}
			pending.Reset()
			pending.WriteString(all[cut:])
		}
	}
	return s.piece(pending.String())
}

// piece sends one text-only audio frame; a piece of blanks is skipped.
func (s *session) piece(text string) error {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	return s.send(protocol.Audio{
		Type:        protocol.TypeAudio,
		Volumes:     []float64{},
		SliceLength: protocol.DefaultAudioSliceMillis,
		DisplayText: protocol.DisplayText{Text: text},
	})
}
