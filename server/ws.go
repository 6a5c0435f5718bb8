package server

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/google/uuid"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// Sessions opens and finds the conversations of WebSocket clients
// (package conversation's, as app hands them over).
type Sessions interface {
	// Open starts the session of one client connection, writing to out;
	// ctx bounds its life. It returns nil, nil once koe is shutting down,
	// and an error (for the client) when the connection cannot have its
	// client_uid: a session without a client of its own holds it (a
	// scene's, the live session, a Realtime connection's).
	Open(ctx context.Context, out Sender, opts SessionOptions) (Session, error)
	// Find returns the open session of a client, or nil.
	Find(clientUID string) SessionState
	// List describes the open sessions, ordered by client_uid.
	List() []protocol.SessionInfo
}

// SessionOptions describe one client connection.
type SessionOptions struct {
	// ClientUID identifies the connection (the client may keep it across
	// reconnects).
	ClientUID string
	// KoeEvents: the client asked for koe's own events besides the OLV
	// message set.
	KoeEvents bool
	// Replaced is called when a new connection opens a session with the
	// same ClientUID: this one is to be closed.
	Replaced func()
	Logger   *slog.Logger
}

// Session is a client's conversation as its connection drives it, from
// the read loop.
type Session interface {
	// Greet sends the OLV connect sequence.
	Greet()
	// Dispatch handles one text frame; an error is for the client.
	Dispatch(in protocol.Inbound) error
	// FeedPCM takes one binary frame of microphone audio.
	FeedPCM(data []byte) error
	// Close stops the running turn and ends the session.
	Close()
	// Drain makes the session start no turn from now on (koe is
	// restarting): an input that would start one fails with
	// koe.ErrRestarting, before anything of it is stored. It reports
	// whether a turn is running; if so, idle is called once that turn
	// has ended and stored its records. idle must not block for long.
	Drain(idle func()) bool
}

// Sender delivers messages to one client, in the order they were sent: a
// WebSocket connection, an event stream. Sessions write to it.
type Sender interface {
	// Send queues msg; if ctx ends before the writer reaches it, it is
	// dropped unsent.
	Send(ctx context.Context, msg any) error
	// SendWait queues msg and returns once it has been written.
	SendWait(ctx context.Context, msg any) error
}

// socketStarted registers a WebSocket connection, so that Shutdown waits
// for it, or reports false once Shutdown has begun. socketEnded counts it
// off.
func (s *Server) socketStarted() bool {
	// Registered under the lock that Shutdown takes before it waits: a
	// WaitGroup must not grow once Wait has begun.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns.Add(1)
	s.sessions.Add(1)
	return true
}

func (s *Server) socketEnded() {
	s.sessions.Add(-1)
	s.conns.Done()
}

func (s *Server) handleWS(c *websocket.Conn) {
	if !s.socketStarted() {
		return
	}
	defer s.socketEnded()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// This goroutine lives as long as the connection, with the stack it
	// grew to: opening the session runs apart (see onOwnStack), and this
	// function keeps only what the read loop needs, so that an idle
	// connection holds a stack of 4 KiB rather than 8.
	sk := onOwnStack(func() *socket { return s.openSocket(ctx, c) })
	if sk == nil {
		return
	}
	defer sk.opened()
	if sk.watch != nil {
		sk.watch()
		return
	}
	defer sk.added()
	r := sk.reader
	err := r.conn.readPump(r.text, r.binary, r.reject)
	r.log.Info("client disconnected", "reason", err)

	// The turn stops (and stores what it has) while the writer still runs;
	// its frames are dropped by then anyway.
	r.conn.close(closeNormal, "")
	cancel()
	r.sess.Close()
	r.conn.wait()
}

// socket is an opened WebSocket as handleWS runs it: a session's reader,
// or a watcher.
type socket struct {
	reader *reader
	watch  func() // a watcher's read loop (handleWatch); nil for a session
	opened func() // ends the open-session metric
	added  func() // takes the session out of the server's list
}

// openSocket opens the session (or the watch) of a new connection and
// greets it. It returns nil when the connection was closed instead
// (draining, shutting down).
func (s *Server) openSocket(ctx context.Context, c *websocket.Conn) *socket {
	clientUID := c.Query(clientUIDQuery)
	if clientUID == "" {
		clientUID = uuid.NewString()
	}
	log := s.log.With("client_uid", clientUID)

	cn := newConn(c.Conn, s.cfg, log, s.metrics)
	cn.start(s.base, s.goodbye)
	if s.drain.draining() {
		// Accepted, then closed: a browser sees the close code of a
		// socket that opened, never why an upgrade was refused.
		log.Debug("connection sent elsewhere: koe is draining")
		cn.close(closeServiceRestart, restartReason)
		cn.wait()
		return nil
	}

	koeEvents := c.Subprotocol() == protocol.Subprotocol || c.Query("koe") == "1"
	if target, ok := watchTarget(c.Query); ok {
		return &socket{
			opened: s.metrics.SessionOpened("watcher"),
			watch:  func() { s.handleWatch(c, cn, clientUID, target, koeEvents) },
		}
	}
	opened := s.metrics.SessionOpened("websocket")
	sess, err := s.opts.Sessions.Open(ctx, cn, SessionOptions{ClientUID: clientUID, KoeEvents: koeEvents, Logger: log,
		Replaced: func() { cn.close(closeNormal, "replaced by a new connection with the same client_uid") }})
	if err != nil {
		// Said in a frame (a close reason is too short for it), written
		// before the close, which drops what is still queued.
		msg := s.explain(err).Message
		log.Info("connection refused", "ip", socketClientIP(c.Locals(clientIPLocal)), "err", msg)
		_ = cn.SendWait(ctx, protocol.NewError(msg))
		cn.close(closePolicy, "this client_uid cannot be yours: see the error message")
		cn.wait()
		opened()
		return nil
	}
	if sess == nil {
		cn.close(closeGoingAway, "server shutting down")
		cn.wait()
		opened()
		return nil
	}
	log.Info("client connected", "ip", socketClientIP(c.Locals(clientIPLocal)), "koe_events", koeEvents)
	sess.Greet()
	return &socket{
		reader: &reader{sess: sess, conn: cn, log: log, explain: s.explain, errors: rateLimited{every: 10 * time.Second}},
		opened: opened,
		added:  s.addSession(sess, cn),
	}
}

// reader turns one connection's frames into session calls. It runs in the
// connection's read loop, like the session's voice input.
type reader struct {
	sess    Session
	conn    *conn
	log     *slog.Logger
	explain func(error) Problem
	// errors bounds the error log lines of one connection: a client that
	// sends garbage in a loop must not flood the log.
	errors rateLimited
}

func (r *reader) text(data []byte) {
	in, err := protocol.Decode(data)
	if err != nil {
		r.reject(err.Error())
		return
	}
	if err := r.sess.Dispatch(in); err != nil {
		r.fail(in.Type, err)
	}
}

func (r *reader) binary(data []byte) {
	if err := r.sess.FeedPCM(data); err != nil {
		r.fail("binary audio", err)
	}
}

// restarting closes the connection of an input refused because koe drains
// (see drain.go): with 1012, no error frame, the client sends it again on
// its new connection.
func (r *reader) restarting(what string, err error) bool {
	if !errors.Is(err, koe.ErrRestarting) {
		return false
	}
	r.log.Info("input refused: koe is draining; the client is sent elsewhere", "type", quote.Shorten(what, 40))
	r.conn.close(closeServiceRestart, restartReason)
	return true
}

// fail answers a failed message with an error frame: what Explain says,
// prefixed with what the client sent. Internal failures are logged in
// full; the client's own mistakes only at debug level.
func (r *reader) fail(what string, err error) {
	if r.restarting(what, err) {
		return
	}
	p := r.explain(err)
	what = quote.Shorten(what, 40)
	if p.Kind == koe.Internal {
		if n, ok := r.errors.due(); ok {
			r.log.Error("message failed", "type", what, "err", err, "failures", n)
		}
	} else {
		r.log.Debug("message refused", "type", what, "err", err)
	}
	r.send(protocol.NewError(what + ": " + p.Message))
}

// reject answers a frame that could not be read at all.
func (r *reader) reject(message string) {
	if n, ok := r.errors.due(); ok {
		r.log.Info("unreadable message", "problem", quote.Shorten(message, 120), "messages", n)
	}
	r.send(protocol.NewError(message))
}

func (r *reader) send(msg any) {
	if err := r.conn.Send(context.Background(), msg); err != nil {
		r.log.Debug("message not queued", "err", err)
	}
}

// BackgroundFiles lists the image files of a backgrounds directory, for
// fetch-backgrounds.
func BackgroundFiles(dir string) []string {
	files := []string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			slog.Warn("cannot list backgrounds", "dir", dir, "err", err)
		}
		return files
	}
	for _, e := range entries {
		if e.Type().IsRegular() && isImage(e.Name()) {
			files = append(files, e.Name())
		}
	}
	sort.Strings(files)
	return files
}
