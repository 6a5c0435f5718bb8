package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	fws "github.com/fasthttp/websocket"
)

// Close codes koe sends (RFC 6455 section 7.4.1). The WebSocket library
// itself sends 1009 for a message over the hard read limit (four times
// server.max_message_bytes).
const (
	closeNormal     = fws.CloseNormalClosure   // 1000: the client left, or koe ended the session
	closeGoingAway  = fws.CloseGoingAway       // 1001: koe is shutting down
	closePolicy     = fws.ClosePolicyViolation // 1008: the client stopped reading its messages
	closeBrokenConn = fws.CloseAbnormalClosure // 1006, never sent: the socket broke
)

var (
	errConnClosed = errors.New("connection closed")
	errSlowClient = errors.New("client is not reading fast enough; send queue full")
)

// frame is one queued message. ctx is the context of whoever sent it (a
// turn, or the connection): if it has ended by the time the writer gets to
// the frame, the frame is dropped, so a cancelled turn goes silent at once.
type frame struct {
	ctx  context.Context
	data []byte
	done chan error // nil unless the sender waits for the write
}

func (f frame) finish(err error) {
	if f.done != nil {
		f.done <- err
	}
}

// conn is one WebSocket connection: the read loop runs in the handler's
// goroutine and exactly one writer goroutine owns all writes.
type conn struct {
	ws  *fws.Conn
	cfg Config
	log *slog.Logger

	queue     chan frame
	closed    chan struct{}
	closeOnce sync.Once
	closeCode int
	closeText string
}

func newConn(ws *fws.Conn, cfg Config, log *slog.Logger) *conn {
	return &conn{
		ws:     ws,
		cfg:    cfg,
		log:    log,
		queue:  make(chan frame, cfg.SendQueueSize),
		closed: make(chan struct{}),
	}
}

// Send queues msg for the writer. It blocks only while this client's queue
// is full, and at most for the write timeout.
func (c *conn) Send(ctx context.Context, msg any) error {
	return c.enqueue(ctx, msg, nil)
}

// SendWait queues msg and waits until it has been written.
func (c *conn) SendWait(ctx context.Context, msg any) error {
	done := make(chan error, 1)
	if err := c.enqueue(ctx, msg, done); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return errConnClosed
	}
}

func (c *conn) enqueue(ctx context.Context, msg any, done chan error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return errConnClosed
	default:
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %T: %w", msg, err)
	}
	f := frame{ctx: ctx, data: data, done: done}
	select {
	case c.queue <- f:
		return nil
	default:
	}
	// Full: a burst (a fast LLM) fills the queue faster than any socket
	// drains, so first hold the sender back, which slows only this
	// session. A client whose queue stays full for a whole write timeout
	// is not reading: drop it.
	t := time.NewTimer(c.cfg.WriteTimeout)
	defer t.Stop()
	select {
	case c.queue <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return errConnClosed
	case <-t.C:
		c.log.Warn("disconnecting a client that stopped reading", "queued", len(c.queue), "waited", c.cfg.WriteTimeout)
		c.close(closePolicy, "send queue full")
		// The writer is most likely blocked on the client's full socket:
		// fail that write now rather than after another write timeout.
		// (net.Conn deadlines are safe to set from any goroutine.)
		_ = c.ws.NetConn().SetWriteDeadline(time.Now())
		return errSlowClient
	}
}

// close asks the writer to say goodbye with code and stop. Safe to call
// from any goroutine, any number of times; the first call wins.
func (c *conn) close(code int, text string) {
	c.closeOnce.Do(func() {
		c.closeCode, c.closeText = code, text
		close(c.closed)
	})
}

// writePump is the only goroutine that writes to the socket. It returns
// after close (or a write error) and then ends the read loop too. shutdown
// closes when the whole server stops: the client is told "going away".
func (c *conn) writePump(shutdown <-chan struct{}) {
	ping := time.NewTicker(c.cfg.PingInterval)
	defer ping.Stop()
	defer c.endReads()
	for {
		select {
		case f := <-c.queue:
			if err := f.ctx.Err(); err != nil {
				f.finish(err)
				continue
			}
			_ = c.ws.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
			err := c.ws.WriteMessage(fws.TextMessage, f.data)
			f.finish(err)
			if err != nil {
				c.log.Debug("write failed", "err", err)
				c.close(closeBrokenConn, "")
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(fws.PingMessage, nil, time.Now().Add(c.cfg.WriteTimeout)); err != nil {
				c.close(closeBrokenConn, "")
				return
			}
		case <-shutdown:
			c.close(closeGoingAway, "server shutting down")
			c.goodbye()
			return
		case <-c.closed:
			c.goodbye()
			return
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
		case <-c.closed:
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
