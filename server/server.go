// Package server is koe's HTTP and WebSocket front: routes, connections,
// static pages and asset mounts. It translates frames and requests into
// calls of the small interfaces it declares where it consumes them
// (sessions, chats, histories, documents, memories, watchers, the live
// chat: see Options) and their answers back; app hands it the
// implementations, and its fast tests fakes. It knows no LLM and no
// conversation.
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/gofiber/fiber/v2/utils"
	"github.com/valyala/fasthttp"

	"koe/internal/quote"
	"koe/knowledge"
	"koe/protocol"
)

// Options are everything a Server is built from.
type Options struct {
	Config Config
	// What the routes serve, each as the little server calls of it; app
	// hands over the implementations. All are required but Documents,
	// Memories and LiveChat: without them, their routes say koe runs
	// without documents, long-term memory or a live chat.
	Sessions    Sessions    // WebSocket clients' conversations (ws.go, api.go)
	Chats       Chats       // the chat API's turns (chat.go)
	Histories   Histories   // stored conversations (api.go, chat.go)
	Prompts     Prompts     // the characters' prompts (api.go)
	Documents   Documents   // the characters' knowledge bases (knowledge.go)
	Attachments Attachments // files attached to conversations (knowledge.go)
	Memories    Memories    // long-term memory (memories.go)
	Watchers    Watchers    // watchers of sessions and characters (watch.go)
	Overlays    Overlays    // the overlay page's characters (overlay.go)
	// Explain words the failures the services return for their clients
	// (conversation's Explain); nil: a failure's koe.Kind and text, koe's
	// own failures untold.
	Explain func(error) Problem
	// Pages are koe's own embedded web pages, served at / unless
	// Config.WebClientDir is set.
	Pages fs.FS
	// MaxUploadBytes is the largest file the upload routes take
	// (knowledge.max_file_bytes; 0: knowledge's default). Their bodies may
	// be that large; every other request stays within
	// Config.MaxMessageBytes.
	MaxUploadBytes int
	// LiveChat is the live chat the streamer steers at /api/live (live.go).
	LiveChat LiveChat
	// Scenes are the streamer's all-character scenes at /api/scenes
	// (scenes.go); nil: those routes answer 404.
	Scenes Scenes
	Logger *slog.Logger
	// Metrics, if set, counts sessions and queue drops.
	Metrics Metrics
	// MetricsHandler serves /metrics (Prometheus) when Config.Metrics is
	// on; nil: no /metrics.
	MetricsHandler http.Handler
	// Ready are the checks /readyz runs, in order: the store, and the
	// coordinator when there is one.
	Ready []ReadyCheck
	// Backup copies koe.db for koe backup (backup.go); nil with a store
	// that is backed up otherwise (PostgreSQL: pg_dump).
	Backup Backup

	// MCP are the MCP servers' states and logins (mcpauth.go); nil: none.
	MCP MCPServers

	// Realtime serves the OpenAI Realtime API at /v1/realtime
	// (realtime.go); nil: that route answers 404.
	Realtime Realtimes
}

// Server serves koe over HTTP and WebSocket.
type Server struct {
	opts Options
	cfg  Config
	log  *slog.Logger
	app  *fiber.App

	base     context.Context // ends at shutdown: every writer says goodbye
	stop     context.CancelFunc
	conns    sync.WaitGroup
	sessions atomic.Int64

	mu      sync.Mutex
	closing bool // Shutdown has begun: no new sessions

	drain drainer // what Drain found and waits for (drain.go)

	access *access // Host, Origin and token checks
	// proxies are server.trusted_proxies: whose X-Forwarded-For names
	// the client.
	proxies trustedProxies
	// refusedOrigins bounds the log lines of refused web pages: any page
	// in the user's browser can send requests in a loop.
	refusedOrigins rateLimited
	tracker        *connTracker // every accepted connection
	fileLimit      uint64       // soft RLIMIT_NOFILE; 0 if unknown
	maxUpload      int          // Options.MaxUploadBytes, defaulted
	metrics        Metrics      // Options.Metrics, or one that counts nothing
	ready          readyStates  // what /readyz found at its last probe
	// certs is the TLS certificate when server.tls_cert is set; certErr
	// is why it did not load (Serve returns it).
	certs   *certStore
	certErr error
}

// New builds the server and its routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	base, stop := context.WithCancel(context.Background())
	s := &Server{opts: opts, cfg: opts.Config, log: opts.Logger, base: base, stop: stop}
	s.refusedOrigins.every = time.Minute
	s.access = newAccess(s.cfg)
	// Validate has refused a bad entry; a Config built without it
	// trusts no proxy.
	s.proxies, _ = parseTrustedProxies(s.cfg.TrustedProxies)
	s.metrics = opts.Metrics
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if s.cfg.ReadyTimeout <= 0 {
		s.cfg.ReadyTimeout = readyTimeoutFallback
	}
	s.maxUpload = opts.MaxUploadBytes
	if s.maxUpload <= 0 {
		s.maxUpload = knowledge.DefaultMaxFileBytes
	}
	soft, _, err := openFileLimit()
	if err != nil {
		s.log.Warn("open-file limit unknown; server.max_connections defaults to a fixed number", "err", err, "default", fallbackMaxConnections)
	}
	s.fileLimit = soft
	maxConns := s.cfg.MaxConnections
	if maxConns == 0 {
		maxConns = defaultMaxConnections(soft)
	}
	s.tracker = newConnTracker(maxConns, s.cfg.HealthConnections, s.log)
	if s.cfg.TLSCert != "" {
		s.certs, s.certErr = newCertStore(s.cfg.TLSCert, s.cfg.TLSKey, s.log)
	}
	s.app = fiber.New(fiber.Config{
		DisableStartupMessage: true,
		AppName:               "koe",
		ErrorHandler:          s.answerError,
		ReadTimeout:           s.cfg.ReadTimeout,
		// Bodies are streamed: headerReceived sets each request's limit
		// from its headers, and guard reads the body within it (see
		// admit.go). BodyLimit only applies if that hook is bypassed.
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		BodyLimit:                    s.cfg.MaxMessageBytes,
		IdleTimeout:                  s.cfg.IdleTimeout,
	})
	srv := s.app.Server()
	srv.Logger = fasthttpLogger{s.log}
	srv.ConnState = s.tracker.connState
	srv.HeaderReceived = s.headerReceived
	srv.SecureErrorLogMessage = true
	srv.ErrorHandler = s.refuseMalformed
	s.routes()
	return s
}

// fallbackMaxConnections is server.max_connections where the open-file
// limit cannot be read.
const fallbackMaxConnections = 4096

// defaultMaxConnections is half the open-file limit: the other half stays
// for what sessions use besides their own connection (LLM and speech
// connections, speech engines' pipes) and for the database and logs.
func defaultMaxConnections(fileLimit uint64) int {
	if fileLimit == 0 {
		return fallbackMaxConnections
	}
	return int(min(max(fileLimit/2, 16), 1<<20))
}

// fasthttpLogger routes fasthttp's own messages to slog.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	// fasthttp may quote the start of a request it could not parse, and
	// with it a token.
	msg := "http server: " + quote.Redact(fmt.Sprintf(format, args...))
	// koe closed the connection itself (idle at shutdown): nothing wrong.
	if strings.Contains(msg, net.ErrClosed.Error()) {
		l.log.Debug(msg)
		return
	}
	l.log.Warn(msg)
}

// refuseMalformed answers a request fasthttp refused before any handler,
// and closes its connection. The answer says what kind of problem it was
// and never quotes the request: fasthttp's own words may carry its start,
// and with it a token.
func (s *Server) refuseMalformed(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	status, msg := fiber.StatusBadRequest, "Bad Request: the request does not parse as HTTP/1.1 (RFC 9112); koe closes the connection"
	switch {
	case errors.As(err, &small):
		status, msg = fiber.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large: the request line and headers must fit in 4 KB"
	case errors.As(err, &netErr) && netErr.Timeout():
		status, msg = fiber.StatusRequestTimeout, "Request Timeout: the request did not arrive within server.read_timeout"
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status, msg = fiber.StatusRequestEntityTooLarge, s.tooLargeMessage(isUploadRoute(string(ctx.Method()), string(ctx.Path())), -1)
	case errors.Is(err, errBareLF):
		msg = "ambiguous request framing: " + errBareLF.Error() + " (RFC 9112); koe closes the connection"
	case errors.Is(err, fasthttp.ErrGetOnly):
		status, msg = fiber.StatusMethodNotAllowed, "Method Not Allowed"
	}
	s.log.Debug("http request refused before any handler", "status", status, "err", quote.Shorten(quote.Redact(err.Error()), 300))
	ctx.Response.Reset()
	setSecurityHeaders(&ctx.Response.Header)
	ctx.SetConnectionClose()
	ctx.SetStatusCode(status)
	ctx.SetContentType(fiber.MIMEApplicationJSONCharsetUTF8)
	body, _ := json.Marshal(fiber.Map{"error": msg})
	ctx.SetBody(body)
}

func (s *Server) routes() {
	s.app.Use(s.guard)
	s.healthRoutes()
	s.apiRoutes()
	s.mcpRoutes()
	s.realtimeRoutes()
	s.app.Use("/client-ws", checkUpgrade, s.checkSocketQuery, s.keepClientIP)
	s.app.Get("/client-ws", websocket.New(s.handleWS, websocket.Config{
		ReadBufferSize:  wsReadBufferSize,
		WriteBufferSize: wsWriteBufferSize,
		WriteBufferPool: &wsWriteBuffers,
		// A client offering only koe.token.* gets no subprotocol, which
		// non-browser clients accept.
		Subprotocols: []string{protocol.Subprotocol},
	}))

	// Assets may be read from other origins (the OLV client can run on its
	// own dev server); nothing else is CORS-open.
	readOnlyCORS := cors.New(cors.Config{AllowMethods: "GET,HEAD"})
	s.mountDir("/live2d-models", s.cfg.Live2DModelsDir, modelTypes, readOnlyCORS)
	s.mountDir("/bg", s.cfg.BackgroundsDir, imageTypes, readOnlyCORS)
	s.mountDir("/avatars", s.cfg.AvatarsDir, imageTypes, readOnlyCORS)

	s.overlayRoutes(s.opts.Pages)
	s.faviconRoute(s.opts.Pages)
	if s.cfg.WebClientDir != "" {
		s.mount(&fileMount{types: pageTypes, open: dirOpener(s.cfg.WebClientDir), index: true,
			csp: func(*fiber.Ctx) string { return webClientCSP }})
	} else if s.opts.Pages != nil {
		s.mount(&fileMount{types: pageTypes, open: s.opts.Pages.Open, index: true, csp: pageCSP})
	}
}

// A WebSocket's buffers. Both are per connection, and most connections
// are idle most of the time, so neither is sized for throughput:
//   - reads already go through fasthttp's own buffer of the hijacked
//     connection (4 KiB), and a read of a long message that finds this
//     buffer empty bypasses it; this one only has to hold frame headers
//     and control frames (125 bytes);
//   - a write buffer is taken from a pool for the time of one message,
//     so idle connections hold none. Messages longer than the buffer go
//     out in one frame all the same (the rest is written directly).
const (
	wsReadBufferSize  = 1 << 10
	wsWriteBufferSize = 16 << 10
)

// wsWriteBuffers holds the write buffers of connections not writing now;
// one pool per buffer size, as the WebSocket library asks.
var wsWriteBuffers sync.Pool

// assetPrefixes are the asset mounts' URL prefixes.
var assetPrefixes = []string{"/live2d-models", "/bg", "/avatars"}

func isAssetPath(path string) bool {
	for _, p := range assetPrefixes {
		if underPrefix(path, p) {
			return true
		}
	}
	return false
}

// underPrefix reports whether path is prefix or below it. fiber's Use
// matches any path that starts with the prefix ("/bgm" for "/bg").
func underPrefix(path, prefix string) bool {
	return len(path) >= len(prefix) && strings.EqualFold(path[:len(prefix)], prefix) &&
		(len(path) == len(prefix) || path[len(prefix)] == '/')
}

// mountDir serves a directory read-only; a missing directory is logged once
// and answers 404 rather than failing start-up, since most set-ups have no
// Live2D models or backgrounds at first.
func (s *Server) mountDir(prefix, dir string, types map[string]string, cors fiber.Handler) {
	if dir == "" {
		return
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		s.log.Info("asset directory not found; its URL answers 404", "url", prefix, "dir", dir)
	}
	s.app.Use(prefix, func(c *fiber.Ctx) error {
		if !underPrefix(c.Path(), prefix) {
			return c.Next()
		}
		return cors(c)
	})
	s.mount(&fileMount{prefix: prefix, types: types, open: dirOpener(dir)})
}

func (s *Server) mount(m *fileMount) {
	route := m.prefix
	if route == "" {
		route = "/"
	}
	s.app.Use(route, func(c *fiber.Ctx) error {
		if !underPrefix(c.Path(), m.prefix) {
			return c.Next()
		}
		return m.serve(c)
	})
}

// answerError words fasthttp's refusal of an oversized body for the
// route it was sent to, then answers as every failure is answered.
func (s *Server) answerError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) && fe.Code == fiber.StatusRequestEntityTooLarge && fe.Message == utils.StatusMessage(fe.Code) {
		err = fiber.NewError(fe.Code, s.tooLargeMessage(false, -1))
		if isUploadRoute(c.Method(), c.Path()) {
			err = s.cutTooLarge("", 0, nil)
		}
	}
	return s.httpError(c, err)
}

// checkUpgrade accepts only WebSocket upgrades at /client-ws (guard has
// checked their origin already).
func checkUpgrade(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return fiber.NewError(fiber.StatusUpgradeRequired, "this is a WebSocket endpoint")
	}
	return c.Next()
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.checkExposure(ln.Addr()); err != nil {
		_ = ln.Close()
		return err
	}
	if s.certErr != nil {
		_ = ln.Close()
		return s.certErr
	}
	s.log.Info("connection limits", "open_file_limit", s.fileLimit, "max_connections", s.tracker.max,
		"read_timeout", s.cfg.ReadTimeout, "idle_timeout", s.cfg.IdleTimeout)
	if s.certs != nil {
		ln = tls.NewListener(ln, s.certs.tlsConfig())
	}
	if err := s.app.Listener(s.tracker.listen(ln)); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// checkExposure refuses to serve other machines without a token unless
// told to, and says so loudly when told to. config.Load refuses such a
// configuration already; this catches a listener chosen elsewhere.
func (s *Server) checkExposure(addr net.Addr) error {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsLoopback() {
		return nil
	}
	switch {
	case s.cfg.AuthToken != "":
		s.log.Info("koe is reachable from other machines; requests need server.auth_token", "addr", addr.String())
	case s.cfg.InsecureNoAuth:
		s.log.Warn("!!! koe is reachable from other machines WITHOUT AUTHENTICATION (server.insecure_no_auth: true): "+
			"anyone who reaches it can use your LLM and read and change conversations. "+
			"Set server.auth_token unless a proxy in front of koe checks who connects.", "addr", addr.String())
	default:
		return fmt.Errorf("koe would listen on %s, reachable from other machines, without server.auth_token: "+
			"set server.auth_token (or %s), or server.insecure_no_auth: true if a proxy in front of koe checks who connects", addr, EnvAuthToken)
	}
	return nil
}

// Shutdown stops accepting connections, closes connections that hold no
// running request, stops every running turn (each persists what it has)
// and closes every WebSocket with "going away" (after a Drain, with
// "service restart").
func (s *Server) Shutdown(ctx context.Context) error {
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.app.ShutdownWithContext(ctx) }()
	s.tracker.shutdown()
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.stop()
	connsDone := make(chan struct{})
	go func() { s.conns.Wait(); close(connsDone) }()
	select {
	case <-connsDone:
	case <-ctx.Done():
		return fmt.Errorf("shutdown: %d sessions still open: %w", s.sessions.Load(), ctx.Err())
	}
	if err := <-httpDone; err != nil {
		return fmt.Errorf("shutdown http: %w", err)
	}
	return nil
}
