package server

import (
	"bufio"
	"context"
	"strconv"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"koe/protocol"
)

// The chat API: one HTTP request per turn, for bots, scripts and back ends.
//
//	POST /api/chat/stream              the turn as Server-Sent Events
//	POST /api/chat/invoke              the turn's answer as one JSON message
//	POST /api/chat/:history_uid/stop   stop the turn running in a history
//	GET  /api/histories/:conf_uid      a character's histories
//	GET  /api/histories/:conf_uid/:history_uid   ?before=ID&limit=N
//
// Turns run through the same conversation code as WebSocket turns.

// Chats run the chat API's turns.
type Chats interface {
	// OpenChat checks req and readies its turn on a session of its own
	// that writes to out; ctx bounds the turn. An error is for the
	// client.
	OpenChat(ctx context.Context, req protocol.ChatRequest, out Sender) (Chat, error)
	// StopHistory stops the turn running in a history, wherever it runs,
	// and reports whether one was.
	StopHistory(ctx context.Context, historyUID string) (bool, error)
}

// Chat is one chat API turn.
type Chat interface {
	// Run runs the turn and returns once its records are stored. The
	// error is the turn's failure, for the client; a stopped turn is no
	// failure.
	Run() error
	// Close gives up a chat that will not run.
	Close()
}

func (s *Server) chatRoutes(api fiber.Router) {
	api.Post("/chat/stream", s.chatStream)
	api.Post("/chat/invoke", s.chatInvoke)
	s.mcpPromptRoutes(api)
	api.Post("/chat/:history_uid/stop", func(c *fiber.Ctx) error {
		uid := c.Params("history_uid")
		stopped, err := s.opts.Chats.StopHistory(c.UserContext(), uid)
		if err != nil {
			return err
		}
		if !stopped {
			return fiber.NewError(fiber.StatusNotFound, "no turn is running in that history")
		}
		return c.JSON(protocol.StopResult{HistoryUID: uid, Stopped: true})
	})
	api.Get("/histories/:conf_uid", func(c *fiber.Ctx) error {
		list, err := s.opts.Histories.Histories(c.UserContext(), c.Params("conf_uid"))
		if err != nil {
			return err
		}
		return c.JSON(list)
	})
	api.Get("/histories/:conf_uid/:history_uid", func(c *fiber.Ctx) error {
		before, limit, err := pageQuery(c)
		if err != nil {
			return err
		}
		h, err := s.opts.Histories.ChatHistory(c.UserContext(), c.Params("conf_uid"), c.Params("history_uid"), before, limit)
		if err != nil {
			return err
		}
		return c.JSON(h)
	})
}

// pageQuery reads ?before=ID&limit=N.
func pageQuery(c *fiber.Ctx) (before uint64, limit int, err error) {
	before, err = strconv.ParseUint(c.Query("before", "0"), 10, 64)
	if err != nil {
		return 0, 0, fiber.NewError(fiber.StatusBadRequest, "before must be a message id (a whole number)")
	}
	limit, err = strconv.Atoi(c.Query("limit", "0"))
	if err != nil {
		return 0, 0, fiber.NewError(fiber.StatusBadRequest, "limit must be a whole number")
	}
	return before, limit, nil
}

// chatRequest reads the body of a chat request.
func chatRequest(c *fiber.Ctx) (protocol.ChatRequest, error) {
	var body protocol.ChatRequest
	err := decodeJSON(c, &body)
	return body, err
}

// startChat registers a chat turn with the server, so that Shutdown waits
// for it to store what it has and a drain for it to end. It refuses once
// a drain or shutdown has begun; endChat counts it off.
func (s *Server) startChat() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errShuttingDown
	}
	if !s.drain.chatStarted() {
		return errDraining
	}
	s.conns.Add(1)
	return nil
}

// startBackground registers work that is no turn but needs the server
// open (a backup's read transaction): Shutdown waits for it; a drain
// neither refuses nor counts it.
func (s *Server) startBackground() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return errShuttingDown
	}
	s.conns.Add(1)
	return nil
}

// endChat counts off a chat turn startChat registered, once it has stored
// its records.
func (s *Server) endChat() {
	s.chatEnded()
	s.conns.Done()
}

var errShuttingDown = fiber.NewError(fiber.StatusServiceUnavailable, "koe is shutting down")

// chatStream answers with the turn's events. Everything that can be
// refused is refused before the stream starts, with an HTTP status; once
// it has started, failures are error events, and end is always last.
func (s *Server) chatStream(c *fiber.Ctx) error {
	req, err := chatRequest(c)
	if err != nil {
		return err
	}
	tokens := req.StreamTokens == nil || *req.StreamTokens
	ctx, cancel := context.WithCancel(s.base)
	log := s.log.With("chat", uuid.NewString(), "ip", s.clientIP(c))
	st := newSSEStream(s.cfg, log, c.Context().Conn(), tokens, cancel)
	chat, err := s.opts.Chats.OpenChat(ctx, req, st)
	if err != nil {
		cancel()
		return err
	}
	if err := s.startChat(); err != nil {
		cancel()
		chat.Close()
		return err
	}
	c.Set(fiber.HeaderContentType, "text/event-stream; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	// Proxies that buffer responses (nginx) would hold the events back.
	c.Set("X-Accel-Buffering", "no")

	// The turn runs beside the writer; the writer owns it (cancel) and
	// ends with it (end).
	closed := s.metrics.SessionOpened("sse")
	go func() {
		defer s.endChat()
		defer closed()
		if err := chat.Run(); err != nil && s.isInternal(err) {
			log.Error("chat turn failed", "err", err)
		}
		if s.base.Err() != nil {
			_ = st.Send(context.Background(), protocol.NewError("koe is shutting down; the reply so far is stored"))
		}
		st.end()
	}()
	conn := c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		gone, stopWatch := watchPeer(conn)
		defer stopWatch()
		st.write(w, gone)
	})
	return nil
}

// chatInvoke runs the turn and answers with its final message.
func (s *Server) chatInvoke(c *fiber.Ctx) error {
	req, err := chatRequest(c)
	if err != nil {
		return err
	}
	// A client that leaves stops the turn, as with the stream.
	ctx, done := s.clientContext(c)
	defer done()
	out := &answerCollector{}
	chat, err := s.opts.Chats.OpenChat(ctx, req, out)
	if err != nil {
		return err
	}
	if err := s.startChat(); err != nil {
		chat.Close()
		return err
	}
	err = chat.Run()
	done()
	s.endChat()
	if err != nil {
		return err
	}
	answer, ok := out.answer()
	if !ok {
		// Stopped before it said anything: nothing was stored.
		answer = protocol.ChatMessage{Type: protocol.MessageAI, ResponseMetadata: protocol.ResponseMetadata{FinishReason: "interrupted"},
			AdditionalKwargs: protocol.AdditionalKwargs{HistoryUID: out.historyUID(), Interrupted: true}}
	}
	return c.JSON(answer)
}

// answerCollector is the Sender of an invoked turn: it keeps the turn's
// final answer (the last ai message that calls no tools) and where the
// turn is stored.
type answerCollector struct {
	mu      sync.Mutex
	final   *protocol.ChatMessage
	history string
}

func (a *answerCollector) Send(_ context.Context, msg any) error {
	m, ok := msg.(protocol.MessageEvent)
	if !ok {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if uid := m.Content.AdditionalKwargs.HistoryUID; uid != "" {
		a.history = uid
	}
	if m.Content.Type == protocol.MessageAI && len(m.Content.ToolCalls) == 0 {
		final := m.Content
		a.final = &final
	}
	return nil
}

func (a *answerCollector) SendWait(ctx context.Context, msg any) error { return a.Send(ctx, msg) }

func (a *answerCollector) answer() (protocol.ChatMessage, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.final == nil {
		return protocol.ChatMessage{}, false
	}
	return *a.final, true
}

func (a *answerCollector) historyUID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.history
}
