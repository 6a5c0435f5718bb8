package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"koe/protocol"
)

var errStreamEnded = errors.New("event stream ended")

// sseStream is one chat API response. The turn's session sends it
// protocol messages (it is the session's Sender); it keeps those the event
// stream carries, as events, in its outbox, and fasthttp's stream writer
// writes them in order with heartbeats in between. It is the turn's owner
// too: when the client leaves, it cancels the turn.
type sseStream struct {
	cfg    Config
	log    *slog.Logger
	tokens bool               // the client asked for token events
	cancel context.CancelFunc // ends the turn
	conn   net.Conn           // for write deadlines and to see the client leave

	out  *outbox       // the events waiting for the writer (see outbox.go)
	wake chan struct{} // capacity 1: the outbox has work for the writer
}

func newSSEStream(cfg Config, log *slog.Logger, conn net.Conn, tokens bool, cancel context.CancelFunc) *sseStream {
	st := &sseStream{cfg: cfg, log: log, conn: conn, tokens: tokens, cancel: cancel, wake: make(chan struct{}, 1)}
	st.out = newOutbox(cfg, errStreamEnded, st.notify)
	return st
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
	case protocol.Citations:
		ev = protocol.ChatEvent{Type: protocol.EventCitations, Content: protocol.CitationsBody{HistoryUID: m.HistoryUID, RunID: m.RunID, Citations: m.Citations}}
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
	err = st.out.send(ctx, frame{ctx: ctx, data: data, done: done})
	if errors.Is(err, errSlowClient) {
		st.log.Warn("ending an event stream whose client stopped reading", "waited", st.cfg.WriteTimeout)
		st.leave()
		// Fail the write that is stuck on the full socket now.
		_ = st.conn.SetWriteDeadline(time.Now())
	}
	return err
}

// Offer queues msg as an event without waiting (conversation.Offerer):
// the stream follows a group's round as one more listener, and the round's
// speakers never wait for it. A stream that fell behind by
// server.watcher_queue_bytes is ended, as a watcher is: its chat stops.
func (st *sseStream) Offer(ctx context.Context, msg any) {
	if ctx.Err() != nil {
		return
	}
	data, err := st.event(msg)
	if err != nil || data == nil {
		return
	}
	if queued, ok := st.out.offer(frame{ctx: ctx, data: data}); !ok {
		st.log.Warn("ending an event stream that fell behind", "queued_bytes", queued, "limit", "server.watcher_queue_bytes")
		st.leave()
		_ = st.conn.SetWriteDeadline(time.Now())
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
	st.out.end(frame{ctx: context.Background(), data: data})
}

// leave marks the client gone: the turn is cancelled, and senders and the
// writer stop.
func (st *sseStream) leave() {
	st.out.close()
	st.cancel()
}

// write is fasthttp's stream writer: it writes events as they come until
// the end event, a heartbeat comment when there has been nothing for a
// while, and cancels the turn when the client leaves (a failed write, or
// the peer closing its side, seen by clientGone).
func (st *sseStream) write(w *bufio.Writer, clientGone <-chan struct{}) {
	defer func() {
		st.leave()
		for _, f := range st.out.rest() {
			f.finish(errStreamEnded)
		}
		// fasthttp writes the end of the chunked body and may reuse the
		// connection: no deadline of the stream's may outlive it.
		_ = st.conn.SetWriteDeadline(time.Time{})
	}()
	// Heartbeats show the stream alive to proxies and clients while the
	// LLM thinks or a tool runs.
	heartbeat := time.NewTicker(st.cfg.SSEHeartbeat)
	defer heartbeat.Stop()
	for {
		frames, last, closed := st.out.takeAll()
		if closed {
			return
		}
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
		if len(frames) > 0 {
			// More may have come while these were written: the outbox
			// wakes an idle writer only, and this one is not yet.
			continue
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
