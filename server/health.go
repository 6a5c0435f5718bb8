package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
)

// Metrics is told what the server layer counts: open sessions by kind and
// connections dropped because their queue stayed full. Its methods must be
// quick and never block.
type Metrics interface {
	// SessionOpened counts a session of kind (websocket, watcher, sse) as
	// open until closed is called.
	SessionOpened(kind string) (closed func())
	// QueueDropped counts a connection dropped for a full queue
	// (websocket, watcher).
	QueueDropped(queue string)
	// Draining marks the instance draining, until it exits.
	Draining()
	// DrainTurnFinished counts a turn that ended while koe drained.
	DrainTurnFinished()
	// DrainEnded counts the turns still running at the drain's end, which
	// shutdown stops, and how long the drain took.
	DrainEnded(cut int, took time.Duration)
}

type noMetrics struct{}

func (noMetrics) SessionOpened(string) func()   { return func() {} }
func (noMetrics) QueueDropped(string)           {}
func (noMetrics) Draining()                     {}
func (noMetrics) DrainTurnFinished()            {}
func (noMetrics) DrainEnded(int, time.Duration) {}

// ReadyCheck is one dependency /readyz checks: the store, the
// coordinator. Check gets a context bounded by server.ready_timeout and
// returns nil when the dependency answers.
type ReadyCheck struct {
	Name  string
	Check func(context.Context) error
}

// healthRoutes serves /healthz, /readyz and, when enabled, /metrics.
// /healthz and /readyz answer without the token (load balancers probe
// without one) and say nothing but names and states; /metrics is behind
// the token like the API.
func (s *Server) healthRoutes() {
	s.app.Get("/healthz", func(c *fiber.Ctx) error {
		// A draining koe is alive: it must not be restarted for it.
		if s.drain.draining() {
			return c.JSON(fiber.Map{"status": "ok", "sessions": s.sessions.Load(), "draining": true})
		}
		return c.JSON(fiber.Map{"status": "ok", "sessions": s.sessions.Load()})
	})
	s.app.Get("/readyz", s.readyz)
	if s.cfg.Metrics && s.opts.MetricsHandler != nil {
		s.app.Get("/metrics", adaptor.HTTPHandler(s.opts.MetricsHandler))
	}
}

// isProbeRoute reports the routes a connection in the reserve past
// server.max_connections may ask for.
func isProbeRoute(method, path string) bool {
	return (method == fiber.MethodGet || method == fiber.MethodHead) &&
		(isRoute(path, "/healthz") || isRoute(path, "/readyz") || isRoute(path, "/metrics"))
}

// reservedOnly refuses anything but a probe on a connection let in past
// server.max_connections (see connTracker.reserve), and closes such a
// connection after its one request.
func (s *Server) reservedOnly(c *fiber.Ctx) error {
	tc, ok := tracked(c.Context().Conn())
	if !ok || !tc.reserved() {
		return nil
	}
	c.Context().SetConnectionClose()
	if isProbeRoute(c.Method(), c.Path()) {
		return nil
	}
	c.Set(fiber.HeaderRetryAfter, "5")
	return fiber.NewError(fiber.StatusServiceUnavailable, fmt.Sprintf(
		"koe is at its connection limit (server.max_connections = %d); try again shortly", s.tracker.max))
}

// readyz answers 200 when every check passes, 503 naming the failing ones
// otherwise (their errors go to the log, not to whoever probes).
func (s *Server) readyz(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "shutting down"})
	}
	if s.drain.draining() {
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "draining"})
	}
	checks := make(fiber.Map, len(s.opts.Ready))
	var failing []string
	for _, rc := range s.opts.Ready {
		ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.ReadyTimeout)
		err := rc.Check(ctx)
		cancel()
		s.ready.note(s, rc.Name, err)
		if err != nil {
			checks[rc.Name] = "failing"
			failing = append(failing, rc.Name)
			continue
		}
		checks[rc.Name] = "ok"
	}
	if len(failing) > 0 {
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "not ready", "failing": failing, "checks": checks})
	}
	return c.JSON(fiber.Map{"status": "ready", "checks": checks})
}

// readyStates remembers which checks failed at the last probe, so that a
// probe every few seconds logs a failure when it starts and when it ends,
// not at every probe.
type readyStates struct {
	mu      sync.Mutex
	failing map[string]bool
}

func (r *readyStates) note(s *Server, name string, err error) {
	r.mu.Lock()
	was := r.failing[name]
	if r.failing == nil {
		r.failing = map[string]bool{}
	}
	r.failing[name] = err != nil
	r.mu.Unlock()
	switch {
	case err != nil && !was:
		s.log.Warn("readiness check failing; /readyz answers 503", "check", name, "err", err)
	case err == nil && was:
		s.log.Info("readiness check passes again", "check", name)
	}
}

// readyTimeoutFallback applies when a Config was built without defaults.
const readyTimeoutFallback = 2 * time.Second
