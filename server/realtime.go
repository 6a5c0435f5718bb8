package server

import (
	"context"
	"log/slog"
	"strings"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
)

// The OpenAI Realtime API at GET /v1/realtime (package realtime speaks
// its events; app hands it over as Options.Realtime). Access is checked
// as for /client-ws, before the upgrade: the Host, a browser's Origin,
// and server.auth_token as "Authorization: Bearer <token>", ?token=, or
// the subprotocols the SDKs offer (openai-insecure-api-key.<token>, or
// koe's koe.token.<token>). Messages are bounded by
// server.max_message_bytes, and connections by the server's limits.

const realtimeRoute = "/v1/realtime"

// Subprotocols of the Realtime API: "realtime" is what the browser SDKs
// offer and expect back; the beta one marks the beta dialect, the
// insecure-api-key one carries the token.
const (
	realtimeSubprotocol     = "realtime"
	realtimeBetaSubprotocol = "openai-beta.realtime-v1"
	realtimeKeySubprotocol  = "openai-insecure-api-key."
)

// Realtimes open Realtime API connections.
type Realtimes interface {
	// OpenRealtime starts the conversation of one connection, writing to
	// out, and greets it; ctx bounds its life. It returns nil once koe
	// is shutting down.
	OpenRealtime(ctx context.Context, out RealtimeWriter, opts RealtimeOptions) RealtimeConn
}

// RealtimeOptions describe one Realtime connection.
type RealtimeOptions struct {
	Model string // ?model=
	Beta  bool   // the beta dialect was asked for
	// MaxItemBytes bounds the words a connection's items hold:
	// server.max_message_bytes, the most one message may carry.
	MaxItemBytes int
	// MaxItems bounds the items it remembers: server.realtime_max_items.
	MaxItems int
	Logger   *slog.Logger
}

// RealtimeWriter is a connection's writer as a Realtime conversation
// writes to it.
type RealtimeWriter interface {
	Sender
	SendThen(ctx context.Context, msg any, then func()) error
}

// RealtimeConn is one Realtime conversation, as its connection's read
// loop drives it.
type RealtimeConn interface {
	// Handle takes one text message.
	Handle(data []byte)
	// Reject answers a message that was not handed over, saying why.
	Reject(message string)
	// Close ends the conversation.
	Close()
	// Drain starts no response from now on (koe is restarting); see
	// Session.Drain.
	Drain(idle func()) bool
}

// realtimeBetaLocal marks, before the upgrade, a client that asked for
// the beta dialect.
const realtimeBetaLocal = "koe.realtime.beta"

func (s *Server) realtimeRoutes() {
	if s.opts.Realtime == nil {
		s.app.Get(realtimeRoute, func(c *fiber.Ctx) error {
			return fiber.NewError(fiber.StatusNotFound, "this koe serves no Realtime API")
		})
		return
	}
	s.app.Use(realtimeRoute, checkUpgrade, s.keepClientIP, func(c *fiber.Ctx) error {
		beta := strings.EqualFold(strings.TrimSpace(c.Get("OpenAI-Beta")), "realtime=v1")
		for _, p := range offeredProtocols(c.Get(fiber.HeaderSecWebSocketProtocol)) {
			beta = beta || p == realtimeBetaSubprotocol
		}
		c.Locals(realtimeBetaLocal, beta)
		return c.Next()
	})
	s.app.Get(realtimeRoute, websocket.New(s.handleRealtime, websocket.Config{
		ReadBufferSize:  wsReadBufferSize,
		WriteBufferSize: wsWriteBufferSize,
		WriteBufferPool: &wsWriteBuffers,
		// The browser SDKs offer "realtime" with the key and expect it
		// back; other clients offer none and get none.
		Subprotocols: []string{realtimeSubprotocol},
	}))
}

func offeredProtocols(header string) []string {
	var out []string
	for _, p := range strings.Split(header, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// handleRealtime serves one Realtime connection: one read loop, the
// connection's writer, and the conversation between.
func (s *Server) handleRealtime(c *websocket.Conn) {
	if !s.socketStarted() {
		return
	}
	defer s.socketEnded()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	log := s.log.With("realtime", true)
	cn := newConn(c.Conn, s.cfg, log, s.metrics)
	cn.start(s.base, s.goodbye)
	if s.drain.draining() {
		cn.close(closeServiceRestart, restartReason)
		cn.wait()
		return
	}
	beta, _ := c.Locals(realtimeBetaLocal).(bool)
	opened := s.metrics.SessionOpened("realtime")
	defer opened()
	rc := s.opts.Realtime.OpenRealtime(ctx, cn, RealtimeOptions{Model: c.Query("model"), Beta: beta, MaxItemBytes: s.cfg.MaxMessageBytes, MaxItems: s.cfg.RealtimeMaxItems, Logger: log})
	if rc == nil {
		cn.close(closeGoingAway, "server shutting down")
		cn.wait()
		return
	}
	log.Info("realtime client connected", "ip", socketClientIP(c.Locals(clientIPLocal)), "beta", beta)
	// A drain lets the running response finish, then sends the client
	// elsewhere (1012), as for /client-ws.
	defer s.addSession(rc, cn)()
	err := cn.readPump(rc.Handle, func([]byte) {
		rc.Reject("binary messages are not part of the Realtime API: send audio base64 in input_audio_buffer.append")
	}, rc.Reject)
	log.Info("realtime client disconnected", "reason", err)
	cn.close(closeNormal, "")
	cancel()
	rc.Close()
	cn.wait()
}
