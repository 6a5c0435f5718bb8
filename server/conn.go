package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	fws "github.com/fasthttp/websocket"
)

// Close codes koe sends (RFC 6455 section 7.4.1). The WebSocket library
// itself sends 1009 for a message over the hard read limit (four times
// server.max_message_bytes).
const (
	closeNormal     = fws.CloseNormalClosure   // 1000: the client left, or koe ended the session
	closeGoingAway  = fws.CloseGoingAway       // 1001: koe is shutting down
	closePolicy     = fws.ClosePolicyViolation // 1008: the client stopped reading its messages, or asked for a client_uid it cannot have
	closeBrokenConn = fws.CloseAbnormalClosure // 1006, never sent: the socket broke
)

var (
	errConnClosed = errors.New("connection closed")
	errSlowClient = errors.New("client is not reading fast enough; send queue full")
)

// conn is one WebSocket connection. The read loop runs in the handler's
// goroutine. Writes are made by one writer goroutine at a time, which runs
// only while the outbox has work (queued frames, a ping, the goodbye).
// Pings are due from a timer, which holds no goroutine either.
type conn struct {
	ws      *fws.Conn
	cfg     Config
	log     *slog.Logger
	metrics Metrics // counts the drops below
	out     *outbox // the frames waiting for the writer (see outbox.go)

	done chan struct{} // closed by the last writer, after the goodbye
	// stopWatch stops the shutdown watch (see start).
	stopWatch func() bool
	// droppedSlow: the client was dropped for not reading, by whichever
	// noticed first (a sender that found no room, the writer that timed
	// out); the other must not count it again.
	droppedSlow atomic.Bool

	// closeOnce keeps the first close's code and text for the goodbye.
	closeOnce sync.Once
	closeCode int
	closeText string

	mu   sync.Mutex
	ping *time.Timer // makes the next ping due
}

func newConn(ws *fws.Conn, cfg Config, log *slog.Logger, m Metrics) *conn {
	c := &conn{
		ws:      ws,
		cfg:     cfg,
		log:     log,
		metrics: m,
		done:    make(chan struct{}),
	}
	c.out = newOutbox(cfg, errConnClosed, func() { go c.writePump() })
	return c
}

// start begins the keep-alive pings and ties the connection to base, the
// server's life: when base ends, the client is told goodbye's code and
// reason ("going away", or "service restart" after a drain).
func (c *conn) start(base context.Context, goodbye func() (int, string)) {
	c.mu.Lock()
	c.ping = time.AfterFunc(c.cfg.PingInterval, c.pingNow)
	c.mu.Unlock()
	c.stopWatch = context.AfterFunc(base, func() { c.close(goodbye()) })
}

// wait returns once the connection's last writer has said goodbye; after
// it, nothing uses the socket. Call close first.
func (c *conn) wait() {
	<-c.done
	c.stopWatch()
	c.ping.Stop() // set by start, in this goroutine
}

// pingNow runs on the ping timer: a ping is due, and so is the next one.
func (c *conn) pingNow() {
	if !c.out.poke() {
		return
	}
	c.mu.Lock()
	next := c.ping
	c.mu.Unlock()
	next.Reset(c.cfg.PingInterval)
}

// Send queues msg for the writer. It blocks only while this client's queue
// is full, and at most for the write timeout.
func (c *conn) Send(ctx context.Context, msg any) error {
	return c.enqueue(ctx, msg, nil, nil)
}

// SendThen is Send that runs then once msg has been written (or dropped),
// in the writer's goroutine, before the next frame is written. A session
// hands its watchers their copy this way: after its own client's, so that
// waking fifty watchers' writers cannot delay the client's. A nil msg is
// written as nothing: then runs in its place in the order (a frame only
// the watchers take keeps its place among those the client takes too).
func (c *conn) SendThen(ctx context.Context, msg any, then func()) error {
	return c.enqueue(ctx, msg, nil, then)
}

// SendWait queues msg and waits until it has been written.
func (c *conn) SendWait(ctx context.Context, msg any) error {
	done := make(chan error, 1)
	if err := c.enqueue(ctx, msg, done, nil); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.out.closed:
		return errConnClosed
	}
}

func (c *conn) enqueue(ctx context.Context, msg any, done chan error, then func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.out.isClosed() {
		return errConnClosed
	}
	var data []byte
	if msg != nil {
		var err error
		if data, err = json.Marshal(msg); err != nil {
			return fmt.Errorf("encode %T: %w", msg, err)
		}
	}
	err := c.out.send(ctx, frame{ctx: ctx, data: data, done: done, then: then})
	if errors.Is(err, errSlowClient) {
		c.dropSlow("queued", c.out.len())
		c.close(closePolicy, "send queue full")
		// The writer is most likely blocked on the client's full
		// socket: fail that write now rather than after another
		// write timeout. (net.Conn deadlines are safe to set from any
		// goroutine.)
		_ = c.ws.NetConn().SetWriteDeadline(time.Now())
	}
	return err
}

// dropSlow logs and counts a client dropped for not reading, once
// however many noticed it.
func (c *conn) dropSlow(args ...any) {
	if !c.droppedSlow.CompareAndSwap(false, true) {
		return
	}
	c.log.Warn("disconnecting a client that stopped reading", append(args, "waited", c.cfg.WriteTimeout)...)
	c.metrics.QueueDropped("websocket")
}

// offer queues an encoded frame for a watcher without waiting for room:
// the speaker whose frame it is never waits for a watcher. A watcher the
// outbox refuses has fallen behind for real and is disconnected.
func (c *conn) offer(ctx context.Context, data []byte) {
	if queued, ok := c.out.offer(frame{ctx: ctx, data: data}); !ok {
		c.log.Warn("disconnecting a watcher that fell behind", "queued_bytes", queued, "limit", "server.watcher_queue_bytes")
		c.metrics.QueueDropped("watcher")
		c.close(closePolicy, "watcher fell behind (server.watcher_queue_bytes)")
		_ = c.ws.NetConn().SetWriteDeadline(time.Now())
	}
}

// Offer queues msg as offer does an encoded frame: the copy of another
// session's turn that a group's member gets (conversation.Offerer). The
// speaker never waits for it; a member that fell behind is disconnected
// as a watcher is, and leaves its group.
func (c *conn) Offer(ctx context.Context, msg any) {
	if ctx.Err() != nil || c.out.isClosed() {
		return
	}
	data, err := json.Marshal(msg)
	if err != nil {
		c.log.Debug("frame not encoded for a listener", "type", fmt.Sprintf("%T", msg), "err", err)
		return
	}
	c.offer(ctx, data)
}

// close asks the writer to say goodbye with code and stop. Safe to call
// from any goroutine, any number of times; the first call wins.
func (c *conn) close(code int, text string) {
	c.closeOnce.Do(func() { c.closeCode, c.closeText = code, text })
	c.out.close()
}

// writePump writes what is queued, in order, and returns when nothing is.
// After close it drops what is left, says goodbye and ends the read loop
// too; it is then the last writer.
func (c *conn) writePump() {
	for {
		f, w := c.out.next()
		switch w {
		case workNone:
			return
		case workClosed:
			for _, f := range c.out.rest() {
				f.finish(errConnClosed)
			}
			c.goodbye()
			c.endReads()
			close(c.done)
			return
		case workDue:
			if err := c.ws.WriteControl(fws.PingMessage, nil, time.Now().Add(c.cfg.WriteTimeout)); err != nil {
				c.close(closeBrokenConn, "")
			}
			continue
		}
		if err := f.ctx.Err(); err != nil {
			f.finish(err)
			continue
		}
		if f.data == nil {
			f.finish(nil) // a place in the order, nothing to write
			continue
		}
		_ = c.ws.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
		err := c.ws.WriteMessage(fws.TextMessage, f.data)
		f.finish(err)
		if err != nil {
			c.log.Debug("write failed", "err", err)
			// A client that read nothing for a whole write timeout is
			// dropped as one whose queue stayed full is (unless that is
			// why the write failed: it was counted then).
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !c.out.isClosed() {
				c.dropSlow()
			}
			c.close(closeBrokenConn, "")
		}
	}
}

func (c *conn) goodbye() {
	if c.closeCode == closeBrokenConn {
		return // the socket is broken; there is nobody to tell
	}
	msg := fws.FormatCloseMessage(c.closeCode, c.closeText)
	_ = c.ws.WriteControl(fws.CloseMessage, msg, time.Now().Add(time.Second))
}

// closeGrace is how long a peer that got our close frame has to answer it.
const closeGrace = time.Second

// endReads makes the read loop return. Closing the socket cannot do it:
// fasthttp's hijacked connection ignores Close and closes the socket only
// when the handler returns. The read deadline can (net.Conn deadlines are
// safe to set from any goroutine); readPump re-checks closed after every
// deadline it sets, so it cannot extend this one by accident.
func (c *conn) endReads() {
	_ = c.ws.NetConn().SetReadDeadline(time.Now().Add(closeGrace))
}

// readPump reads messages until the socket fails or closes. A message over
// MaxMessageBytes is skipped (read and discarded, never buffered) and
// reported through tooBig; the hard read limit set on the socket closes the
// connection for anything over four times that.
func (c *conn) readPump(handle func([]byte), handleBinary func([]byte), reject func(string)) error {
	limit := int64(c.cfg.MaxMessageBytes)
	c.ws.SetReadLimit(4 * limit)
	deadline := func() error {
		_ = c.ws.SetReadDeadline(time.Now().Add(c.cfg.PongTimeout))
		select {
		case <-c.out.closed:
			c.endReads()
			return errConnClosed
		default:
			return nil
		}
	}
	if err := deadline(); err != nil {
		return err
	}
	c.ws.SetPongHandler(func(string) error { return deadline() })
	for {
		typ, r, err := c.ws.NextReader()
		if err != nil {
			return err
		}
		if err := deadline(); err != nil {
			return err
		}
		data, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return err
		}
		if int64(len(data)) > limit {
			n, err := io.Copy(io.Discard, r)
			if err != nil {
				return err
			}
			reject(fmt.Sprintf("message of %d bytes is over the limit of %d bytes (server.max_message_bytes); it was ignored", int64(len(data))+n, limit))
			continue
		}
		if typ == fws.BinaryMessage {
			handleBinary(data)
			continue
		}
		handle(data)
	}
}
