package server

import (
	"context"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"koe/internal/quote"
	"koe/protocol"
)

// Query parameters of /client-ws.
const (
	// watchQuery and watchConfQuery make the connection a watcher of a
	// client's session or of a character (see conversation/watch.go).
	watchQuery     = "watch"
	watchConfQuery = "watch_conf"
	// clientUIDQuery lets a client keep its client_uid across reconnects,
	// so that its watchers follow it again.
	clientUIDQuery = "client_uid"
)

// Watchers attach watchers to what they follow: a client's session
// across its reconnects, or a character in every session.
type Watchers interface {
	// Watch attaches w to target until stop is called. An unknown
	// character is refused; a client_uid no session has yet is waited
	// for.
	Watch(target protocol.WatchTarget, w Watcher, opts WatchOptions) (stop func(), err error)
	// CheckWatch says why target cannot be watched, if it cannot.
	CheckWatch(target protocol.WatchTarget) error
}

// Watcher receives the frames of what it follows, encoded. Offer must not
// block: the speaker never waits for a watcher.
type Watcher interface {
	Offer(ctx context.Context, frame []byte)
}

// WatchOptions describe one watcher.
type WatchOptions struct {
	// ClientUID is the watcher's own connection id.
	ClientUID string
	// KoeEvents: the watcher also gets koe's events.
	KoeEvents bool
}

// watchTarget is what the request asks to watch, if anything.
func watchTarget(query func(string, ...string) string) (protocol.WatchTarget, bool) {
	t := protocol.WatchTarget{ClientUID: query(watchQuery), ConfUID: query(watchConfQuery)}
	return t, t.ClientUID != "" || t.ConfUID != ""
}

// checkSocketQuery refuses, before the upgrade, a WebSocket whose query
// cannot work: a watch target that cannot be watched, a client_uid that
// cannot be one. Refusing with an HTTP status lets the client show why; a
// socket closed right after opening says nothing.
func (s *Server) checkSocketQuery(c *fiber.Ctx) error {
	if t, ok := watchTarget(c.Query); ok {
		if c.Query(clientUIDQuery) != "" {
			return fiber.NewError(fiber.StatusBadRequest, "a watcher has its own client_uid: drop client_uid or watch")
		}
		if err := s.opts.Watchers.CheckWatch(t); err != nil {
			return s.httpError(c, err)
		}
		return c.Next()
	}
	if uid := c.Query(clientUIDQuery); uid != "" && !protocol.ValidClientUID(uid) {
		return fiber.NewError(fiber.StatusBadRequest, "client_uid must be 1-64 letters, digits, '-' or '_'")
	}
	return c.Next()
}

// handleWatch serves a watcher: frames of the watched sessions go out
// through cn, which the speakers offer them to without waiting. What the
// watcher sends is only kept alive (heartbeat) or refused.
func (s *Server) handleWatch(c *websocket.Conn, cn *conn, clientUID string, target protocol.WatchTarget, koeEvents bool) {
	log := cn.log.With("watching", target.String())
	stop, err := s.opts.Watchers.Watch(target, watchConn{cn}, WatchOptions{ClientUID: clientUID, KoeEvents: koeEvents})
	if err != nil {
		// Checked before the upgrade; only a character that vanished
		// since gets here.
		_ = cn.Send(context.Background(), protocol.NewError(s.explain(err).Message))
		cn.close(closeNormal, "")
		cn.wait()
		return
	}
	log.Info("watcher connected", "ip", socketClientIP(c.Locals(clientIPLocal)), "koe_events", koeEvents)
	w := &watchReader{conn: cn, target: target, errors: rateLimited{every: 10 * time.Second}}
	err = cn.readPump(w.text, w.binary, w.refuse)
	stop()
	log.Info("watcher disconnected", "reason", err)
	cn.close(closeNormal, "")
	cn.wait()
}

// watchConn is a connection as a Watcher.
type watchConn struct{ c *conn }

func (w watchConn) Offer(ctx context.Context, frame []byte) { w.c.offer(ctx, frame) }

// watchReader answers what a watcher sends.
type watchReader struct {
	conn   *conn
	target protocol.WatchTarget
	errors rateLimited
}

func (w *watchReader) text(data []byte) {
	in, err := protocol.Decode(data)
	if err != nil {
		w.refuse(err.Error())
		return
	}
	switch in.Type {
	case protocol.TypeHeartbeat:
		w.send(protocol.Simple{Type: protocol.TypeHeartbeatAck})
	case protocol.TypeFrontendPlaybackComplete:
		// The watched client's own playback ends its turn, not ours.
	default:
		w.refuse(quote.Shorten(in.Type, 40) + ": this connection watches " + w.target.String() + " and cannot send input")
	}
}

func (w *watchReader) binary([]byte) {
	w.refuse("binary audio: this connection watches " + w.target.String() + " and cannot send input")
}

func (w *watchReader) refuse(message string) {
	if _, ok := w.errors.due(); ok {
		w.conn.log.Debug("watcher sent input", "problem", quote.Shorten(message, 120))
	}
	w.send(protocol.NewError(message))
}

func (w *watchReader) send(msg any) {
	if err := w.conn.Send(context.Background(), msg); err != nil {
		w.conn.log.Debug("message not queued", "err", err)
	}
}
