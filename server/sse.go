package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"koe/protocol"
)

var errStreamEnded = errors.New("event stream ended")

// sseStream is one chat API response. The turn's session sends it
// protocol messages (it is the session's conversation.Sender); it keeps
// those the event stream carries, as events, and fasthttp's stream writer
// writes them in order with heartbeats in between. It is the turn's owner
// too: when the client leaves, it cancels the turn.
type sseStream struct {
	cfg    Config
	log    *slog.Logger
	tokens bool               // the client asked for token events
	cancel context.CancelFunc // ends the turn
	conn   net.Conn           // for write deadlines and to see the client leave

	wake chan struct{} // capacity 1: something was queued or the turn ended

	mu    sync.Mutex
	queue frameQueue    // at most cfg.SendQueueSize events
	room  chan struct{} // closed when an event leaves the queue; nil unless a sender waits
	gone  bool          // the client left or the stream was written out: sends fail
	ended bool          // the end event is queued: the writer stops after it
}

func newSSEStream(cfg Config, log *slog.Logger, conn net.Conn, tokens bool, cancel context.CancelFunc) *sseStream {
	return &sseStream{cfg: cfg, log: log, conn: conn, tokens: tokens, cancel: cancel, wake: make(chan struct{}, 1)}
}

// Send queues msg as an event if the stream carries it. It blocks only
// while the client's queue is full, and at most for server.write_timeout.
func (st *sseStream) Send(ctx context.Context, msg any) error {
	return st.enqueue(ctx, msg, nil)
}

// SendWait queues msg and returns once it has been written (or dropped:
// the stream carries no such event).
func (st *sseStream) SendWait(ctx context.Context, msg any) error {
	done := make(chan error, 1)
	if err := st.enqueue(ctx, msg, done); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// event is msg as the stream's event, or nil when it carries none: the
// OLV frames of a turn (chain control, audio pieces, tool_call_status)
// have their chat API counterparts.
func (st *sseStream) event(msg any) ([]byte, error) {
	var ev protocol.ChatEvent
	switch m := msg.(type) {
	case protocol.Token:
		if !st.tokens {
			return nil, nil
		}
		ev = protocol.ChatEvent{Type: protocol.EventToken, Content: m.Content}
	case protocol.Status:
		ev = protocol.ChatEvent{Type: protocol.EventStatus, Content: m.Content}
	case protocol.MessageEvent:
		ev = protocol.ChatEvent{Type: protocol.EventMessage, Content: m.Content}
	case protocol.Error:
		ev = protocol.ChatEvent{Type: protocol.EventError, Content: m.Message}
	case protocol.ChatEvent:
		ev = m
	default:
		return nil, nil
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	// encoding/json escapes line breaks, so one data line holds it all.
	out := make([]byte, 0, len(data)+8)
	out = append(out, "data: "...)
	out = append(out, data...)
	return append(out, '\n', '\n'), nil
}

func (st *sseStream) enqueue(ctx context.Context, msg any, done chan error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := st.event(msg)
	if err != nil {
		return err
	}
	if data == nil && done == nil {
		return nil
	}
	// A message the stream does not carry, waited for, still waits for
	// everything queued before it: the turn ends after such a wait
	// (conversation-chain-end), and with it the context of those events.
	f := frame{ctx: ctx, data: data, done: done}
	var giveUp *time.Timer
	for {
		st.mu.Lock()
		if st.gone || st.ended {
			st.mu.Unlock()
			return errStreamEnded
		}
		if st.queue.len() < st.cfg.SendQueueSize {
			st.queue.push(f)
			st.mu.Unlock()
			st.notify()
			return nil
		}
		if st.room == nil {
			st.room = make(chan struct{})
		}
		room := st.room
		st.mu.Unlock()
		// As on the WebSocket: hold a fast LLM back for a while, then
		// give up on a client that does not read.
		if giveUp == nil {
			giveUp = time.NewTimer(st.cfg.WriteTimeout)
			defer giveUp.Stop()
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-giveUp.C:
			st.log.Warn("ending an event stream whose client stopped reading", "waited", st.cfg.WriteTimeout)
			st.leave()
			// Fail the write that is stuck on the full socket now.
			_ = st.conn.SetWriteDeadline(time.Now())
			return errSlowClient
		}
	}
}

func (st *sseStream) notify() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// end queues the last event: after it the writer returns.
func (st *sseStream) end() {
	data, _ := st.event(protocol.ChatEvent{Type: protocol.EventEnd, Content: ""})
	st.mu.Lock()
	if !st.gone && !st.ended {
		// The end event goes out even into a full queue: it is the last.
		st.queue.push(frame{ctx: context.Background(), data: data})
		st.ended = true
	}
	st.mu.Unlock()
	st.notify()
}

// leave marks the client gone: the turn is cancelled, and senders and the
// writer stop.
func (st *sseStream) leave() {
	st.mu.Lock()
	st.gone = true
	if st.room != nil {
		close(st.room)
		st.room = nil
	}
	st.mu.Unlock()
	st.cancel()
	st.notify()
}

// take removes what is queued; last says the end event is among it, or
// the client is gone.
func (st *sseStream) take() (frames []frame, last bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gone {
		return nil, true
	}
	frames = st.queue.drain()
	if st.room != nil && len(frames) > 0 {
		close(st.room)
		st.room = nil
	}
	return frames, st.ended
}

// write is fasthttp's stream writer: it writes events as they come until
// the end event, a heartbeat comment when there has been nothing for a
// while, and cancels the turn when the client leaves (a failed write, or
// the peer closing its side, seen by clientGone).
func (st *sseStream) write(w *bufio.Writer, clientGone <-chan struct{}) {
	defer func() {
		st.leave()
		// fasthttp writes the end of the chunked body and may reuse the
		// connection: no deadline of the stream's may outlive it.
		_ = st.conn.SetWriteDeadline(time.Time{})
	}()
	// Heartbeats show the stream alive to proxies and clients while the
	// LLM thinks or a tool runs.
	heartbeat := time.NewTicker(st.cfg.SSEHeartbeat)
	defer heartbeat.Stop()
	for {
		frames, last := st.take()
		written := frames[:0]
		for _, f := range frames {
			// An event of a turn that was stopped is dropped, as on the
			// WebSocket; the messages that say how it ended are sent on
			// the session's context and still go out.
			if err := f.ctx.Err(); err != nil {
				f.finish(err)
				continue
			}
			if f.data != nil {
				_, _ = w.Write(f.data)
			}
			written = append(written, f)
		}
		if len(written) > 0 {
			err := st.flush(w)
			for _, f := range written {
				f.finish(err)
			}
			if err != nil {
				return
			}
		}
		if last {
			return
		}
		select {
		case <-st.wake:
		case <-heartbeat.C:
			_, _ = w.WriteString(": keep-alive\n\n")
			if st.flush(w) != nil {
				return
			}
		case <-clientGone:
			st.log.Debug("chat client left; stopping its turn")
			return
		}
	}
}

// flush writes out what is buffered within server.write_timeout.
func (st *sseStream) flush(w *bufio.Writer) error {
	_ = st.conn.SetWriteDeadline(time.Now().Add(st.cfg.WriteTimeout))
	if err := w.Flush(); err != nil {
		st.log.Debug("chat client left; stopping its turn", "err", err)
		return err
	}
	return nil
}
