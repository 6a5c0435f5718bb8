package server

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Draining: on the first SIGTERM koe finishes the turns running on this
// instance before it stops, so that a rolling restart cuts none of them,
// and sends everyone else elsewhere at once (app calls Drain, then
// Shutdown):
//   - /readyz answers 503 "draining", so a load balancer takes the
//     instance out of rotation; /healthz stays 200: the process is alive;
//   - a new WebSocket is accepted and closed at once with 1012 "service
//     restart", which browsers can see (a refused upgrade tells them
//     nothing), and the client connects again, to another instance;
//   - an open session with no running turn is closed so too, at once; one
//     with a running turn once that turn has ended and stored its records.
//     An input that would start a new turn closes the session the same way
//     before the turn starts (nothing of it is stored): the client sends it
//     again on its new connection. Like any new input it also stops the
//     reply running there, as it would have without the drain;
//   - a chat API request that would start a turn gets 503, Retry-After and
//     {"error": ..., "draining": true} from its headers, its body unread;
//     running chat turns finish;
//   - watchers stay until the drain ends, so that they see the running
//     turns to their end; then they get 1012 with everyone left.
//
// Once server.drain_timeout is over, Shutdown stops the turns still running
// (each stores what was heard) and closes what is left with 1012 too.

// Close code and reason of a session koe sends elsewhere because it is
// restarting (RFC 6455 section 7.4.1): clients reconnect at once.
const (
	closeServiceRestart = 1012
	restartReason       = "service restart"
)

// drainRetryAfter is the Retry-After of a chat request refused while koe
// drains: the load balancer has taken this instance out already, or will
// within a probe's interval, so another try soon lands elsewhere.
const drainRetryAfter = 1

// errDraining refuses a chat turn while koe drains (see httpError).
var errDraining = errors.New("koe is restarting and takes no new turn here: send the request again (another instance takes it)")

// DrainResult is what a drain did.
type DrainResult struct {
	// Running turns when the drain began (WebSocket sessions' and chat
	// API turns; the live chat's is app's).
	Running int
	// Finished ended before the drain's end (on their own, or stopped by
	// their client); Cut were still running, for Shutdown to stop.
	Finished, Cut int
	Took          time.Duration
}

// drainer is the server's drain state and the turns it waits for.
type drainer struct {
	mu sync.Mutex
	// on from Drain's start; done from its end, after which a turn that
	// ends is one Shutdown cut and no longer counted.
	on, done bool
	began    time.Time
	// sessions are the open client sessions (not watchers); chats the
	// chat API turns running.
	sessions map[*clientSession]struct{}
	chats    int
	// running counts the turns the drain waits for; finished those that
	// ended; changed is closed and replaced whenever running drops.
	running, finished int
	changed           chan struct{}
}

// clientSession is an open WebSocket session as the drain sees it.
type clientSession struct {
	sess drainable
	conn *conn
}

// drainable is what the drain asks of a session: a /client-ws one, or a
// Realtime one.
type drainable interface {
	Drain(idle func()) bool
}

// draining reports whether a drain has begun.
func (d *drainer) draining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.on
}

// Draining reports whether the server drains (Drain has begun).
func (s *Server) Draining() bool { return s.drain.draining() }

// Drain begins draining (see above) and returns once no turn it waits for
// is running, or ctx has ended (server.drain_timeout, a second signal).
// Calling it again only waits again.
func (s *Server) Drain(ctx context.Context) DrainResult {
	d := &s.drain
	d.mu.Lock()
	first := !d.on
	if first {
		d.on, d.began, d.changed = true, time.Now(), make(chan struct{})
		d.running = d.chats
	}
	open := make([]*clientSession, 0, len(d.sessions))
	for cs := range d.sessions {
		open = append(open, cs)
	}
	d.mu.Unlock()
	if first {
		s.metrics.Draining()
		for _, cs := range open {
			s.drainSession(cs)
		}
		s.log.Info("drain started: /readyz answers 503, new sessions and turns go elsewhere; running turns finish",
			"running_turns", d.count(), "sessions", len(open), "drain_timeout", s.cfg.DrainTimeout)
	}
	for {
		d.mu.Lock()
		n, changed := d.running, d.changed
		d.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-changed:
			continue
		case <-ctx.Done():
		}
		break
	}
	d.mu.Lock()
	d.done = true
	res := DrainResult{Running: d.running + d.finished, Finished: d.finished, Cut: d.running, Took: time.Since(d.began)}
	d.mu.Unlock()
	if first {
		s.metrics.DrainEnded(res.Cut, res.Took)
		s.log.Info("drain finished", "finished", res.Finished, "cut", res.Cut, "took", res.Took.Round(time.Millisecond))
	}
	return res
}

// count is how many turns the drain waits for now.
func (d *drainer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running
}

// drainSession stops a session from starting turns, and sends its client
// elsewhere once it has no turn running: at once, or when its turn ends.
func (s *Server) drainSession(cs *clientSession) {
	d := &s.drain
	d.mu.Lock()
	d.running++ // before the turn can end and count itself off
	d.mu.Unlock()
	running := cs.sess.Drain(func() {
		sendElsewhere(cs.conn)
		s.turnEnded()
	})
	if !running {
		d.mu.Lock()
		d.running--
		d.mu.Unlock()
		sendElsewhere(cs.conn)
	}
}

// turnEnded counts off a turn the drain waited for, unless the drain is
// over (Shutdown stopped it then).
func (s *Server) turnEnded() {
	d := &s.drain
	d.mu.Lock()
	if d.done {
		d.mu.Unlock()
		return
	}
	d.running--
	d.finished++
	left := d.running
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
	s.metrics.DrainTurnFinished()
	s.log.Info("drain: a turn finished", "still_running", left)
}

// sendElsewhere closes a session with 1012 "service restart" once what is
// queued for its client (the end of its last turn) is written.
func sendElsewhere(c *conn) {
	if c.SendThen(context.Background(), nil, func() { c.close(closeServiceRestart, restartReason) }) != nil {
		c.close(closeServiceRestart, restartReason)
	}
}

// addSession registers an open client session; while koe drains, it is
// drained at once. The returned func forgets it.
func (s *Server) addSession(sess drainable, cn *conn) (remove func()) {
	cs := &clientSession{sess: sess, conn: cn}
	d := &s.drain
	d.mu.Lock()
	if d.sessions == nil {
		d.sessions = map[*clientSession]struct{}{}
	}
	d.sessions[cs] = struct{}{}
	on := d.on
	d.mu.Unlock()
	if on {
		s.drainSession(cs)
	}
	return func() {
		d.mu.Lock()
		delete(d.sessions, cs)
		d.mu.Unlock()
	}
}

// chatStarted registers a chat API turn, or reports false while koe
// drains.
func (d *drainer) chatStarted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.on {
		return false
	}
	d.chats++
	return true
}

// chatEnded counts off a chat API turn once it has stored its records.
func (s *Server) chatEnded() {
	d := &s.drain
	d.mu.Lock()
	d.chats--
	counted := d.on
	d.mu.Unlock()
	if counted {
		s.turnEnded()
	}
}

// isTurnRoute reports the routes that start turns (the chat API's, a
// scene's), which a draining koe refuses from their headers.
func isTurnRoute(method, path string) bool {
	return method == fiber.MethodPost && (isRoute(path, "/api/chat/stream") || isRoute(path, "/api/chat/invoke") ||
		isRoute(path, "/api/scenes")) // a scene's lines are turns
}

// refuseDraining answers a turn refused while koe drains: 503, when to try
// again, and the usual error body marked draining, so that a client can
// tell a restart from a failure.
func refuseDraining(c *fiber.Ctx) error {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(drainRetryAfter))
	return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"error": errDraining.Error(), "draining": true})
}

// goodbye is the close code and reason of the sessions Shutdown closes:
// after a drain they go elsewhere (1012), otherwise koe is going away.
func (s *Server) goodbye() (int, string) {
	if s.drain.draining() {
		return closeServiceRestart, restartReason
	}
	return closeGoingAway, "server shutting down"
}
