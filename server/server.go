// Package server is koe's HTTP and WebSocket front: routes, connections,
// static pages and asset mounts. It translates frames to conversation calls
// and back; it knows no LLM.
package server

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"koe/conversation"
	"koe/protocol"
)

// Options are everything a Server is built from.
type Options struct {
	Config Config
	// Hub opens a conversation for every WebSocket client and serves the
	// REST API; app builds it with everything conversations need.
	Hub *conversation.Hub
	// Pages are koe's own embedded web pages, served at / unless
	// Config.WebClientDir is set.
	Pages  fs.FS
	Logger *slog.Logger
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
}

// New builds the server and its routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	base, stop := context.WithCancel(context.Background())
	s := &Server{opts: opts, cfg: opts.Config, log: opts.Logger, base: base, stop: stop}
	s.app = fiber.New(fiber.Config{
		DisableStartupMessage: true,
		AppName:               "koe",
		ErrorHandler:          s.httpError,
	})
	s.routes()
	return s
}

func (s *Server) routes() {
	s.app.Get("/healthz", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"status": "ok", "sessions": s.sessions.Load()})
	})
	s.apiRoutes()
	s.app.Use("/client-ws", s.checkUpgrade)
	s.app.Get("/client-ws", websocket.New(s.handleWS, websocket.Config{
		ReadBufferSize:  8 << 10,
		WriteBufferSize: 16 << 10,
		Subprotocols:    []string{protocol.Subprotocol},
	}))

	open := cors.New()
	s.mountDir("/live2d-models", s.cfg.Live2DModelsDir, open)
	s.mountDir("/bg", s.cfg.BackgroundsDir, open)
	s.mountDir("/avatars", s.cfg.AvatarsDir, open, imagesOnly)

	if s.cfg.WebClientDir != "" {
		s.mountDir("/", s.cfg.WebClientDir, open)
	} else if s.opts.Pages != nil {
		s.app.Use("/", filesystem.New(filesystem.Config{Root: http.FS(s.opts.Pages), Index: "index.html"}))
	}
}

// mountDir serves a directory read-only; a missing directory is logged once
// and answers 404 rather than failing start-up, since most set-ups have no
// Live2D models or backgrounds at first.
func (s *Server) mountDir(prefix, dir string, handlers ...fiber.Handler) {
	if dir == "" {
		return
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		s.log.Info("asset directory not found; its URL answers 404", "url", prefix, "dir", dir)
	}
	for _, h := range handlers {
		s.app.Use(prefix, h)
	}
	s.app.Static(prefix, dir, fiber.Static{Browse: false, Index: "index.html"})
}

var imageExts = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".bmp": true, ".avif": true}

func isImage(name string) bool { return imageExts[strings.ToLower(filepath.Ext(name))] }

// imagesOnly keeps /avatars from serving anything but pictures (no HTML or
// SVG that could run script under koe's origin).
func imagesOnly(c *fiber.Ctx) error {
	if !isImage(c.Path()) {
		return fiber.ErrNotFound
	}
	return c.Next()
}

// checkUpgrade accepts only WebSocket upgrades from allowed origins, so a
// random web page open in the user's browser cannot drive their koe.
func (s *Server) checkUpgrade(c *fiber.Ctx) error {
	if !websocket.IsWebSocketUpgrade(c) {
		return fiber.NewError(fiber.StatusUpgradeRequired, "this is a WebSocket endpoint")
	}
	if origin := c.Get(fiber.HeaderOrigin); !s.originAllowed(origin, c.Get(fiber.HeaderHost)) {
		s.log.Warn("WebSocket from a foreign origin refused; add it to server.allowed_origins if it is yours", "origin", origin)
		return fiber.NewError(fiber.StatusForbidden, "origin not allowed")
	}
	return c.Next()
}

func (s *Server) originAllowed(origin, host string) bool {
	if origin == "" {
		return true // not a browser: native apps, scripts, OBS plugins
	}
	for _, o := range s.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	name := u.Hostname()
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.app.Listener(ln); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Shutdown stops accepting connections, stops every running turn (each
// persists what it has) and closes every WebSocket with "going away".
func (s *Server) Shutdown(ctx context.Context) error {
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.app.ShutdownWithContext(ctx) }()
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
