package realtime

import (
	"context"

	"koe/conversation"
	"koe/protocol"
)

// The session's frames are the turn as koe makes it for every audience;
// the sink renders them as the running response's events. Frames of no
// response (a failure told outside one) become error events; frames the
// API has no event for (koe's status steps, memory states, OLV's
// housekeeping) are left out. Every frame's place in the writer's order is
// kept, so watchers get their copy when the client would have.

// sink is the session's Sender.
type sink struct{ c *Conn }

func (c *Conn) sink() sink { return sink{c} }

func (s sink) Send(ctx context.Context, msg any) error {
	s.c.frame(ctx, msg, nil)
	return nil
}

func (s sink) SendThen(ctx context.Context, msg any, then func()) error {
	s.c.frame(ctx, msg, then)
	return nil
}

// SendWait waits until the frame's events are written: the turn's last
// frames (chain-end) wait so, before the turn's context ends.
func (s sink) SendWait(ctx context.Context, msg any) error {
	done := make(chan struct{})
	s.c.frame(ctx, msg, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// frameRenderer renders a frame no case below knows (the frames of the
// client's function calls): it reports whether it took the frame. r is
// the running response or nil.
type frameRenderer func(c *Conn, r *response, ctx context.Context, msg any) (events []ev, took bool)

// frameRenderers are consulted in order before the frames below; files
// add theirs in init functions.
var frameRenderers []frameRenderer

// frame renders one frame of the session and writes its events; then (the
// watchers' copy, or a waiter) runs once they are written.
func (c *Conn) frame(ctx context.Context, msg any, then func()) {
	r := c.current()
	for _, fr := range frameRenderers {
		if events, ok := fr(c, r, ctx, msg); ok {
			c.sendThen(c.ctx, then, events...)
			return
		}
	}
	var events []ev
	deltas := false
	// A frame is the response's if it comes from the response's turn:
	// the first one (chain-start) names that turn.
	ours := r != nil && r.isTurn(c, ctx, msg)
	switch m := msg.(type) {
	case protocol.Text:
		if !ours || m.Type != protocol.TypeControl {
			break
		}
		switch m.Text {
		case protocol.ControlChainStart:
			// The message item is announced with the first words
			// (textDelta, audioDelta): a response that only calls the
			// client's functions has none.
		case protocol.ControlChainEnd:
			// A turn that failed ends here (one that answered ended its
			// response at backend-synth-complete). Its events follow
			// the frame's own place.
			c.sendThen(c.ctx, then)
			c.finish(r, "completed", "")
			return
		}
	case protocol.Simple:
		if ours && m.Type == protocol.TypeBackendSynthComplete {
			// Everything is sent: the response is done, though the
			// turn may still wait for its audio to be heard before it
			// stores the reply.
			c.sendThen(c.ctx, then)
			c.finish(r, "completed", "")
			return
		}
	case conversation.CallEnded:
		if ours {
			c.mu.Lock()
			if u := m.Usage; u != nil {
				r.usage.PromptTokens += u.PromptTokens
				r.usage.CompletionTokens += u.CompletionTokens
				r.calls++
			}
			r.length = m.FinishReason == "length"
			c.mu.Unlock()
		}
		// Not a frame of the wire: nothing to write, no watcher.
		if then != nil {
			then()
		}
		return
	case protocol.Token:
		if ours && !r.audio {
			c.sendThen(c.ctx, nil, c.notice(r)...)
			events, deltas = c.textDelta(r, m.Content, &then), true
		}
	case protocol.Audio:
		if ours && r.audio {
			c.sendThen(c.ctx, nil, c.notice(r)...)
			events, deltas = c.audioDelta(r, m, &then), true
		}
	case protocol.Error:
		if ours {
			c.mu.Lock()
			r.failure = m.Message
			c.mu.Unlock()
			break
		}
		events = []ev{errorEvent(&clientError{code: "server_error", message: m.Message}, "")}
	}
	if r != nil && !ours {
		if m, ok := msg.(protocol.Text); ok && m.Type == protocol.TypeControl && m.Text == protocol.ControlInterrupt {
			// Stopped from outside (a stop request, a turn in the same
			// history elsewhere): said on the session's context, by the
			// running turn as it stops (a turn stopped by the next
			// response's start tells its watchers only).
			c.sendThen(c.ctx, then)
			r.cancel()
			c.finishCancelled(r, "client_cancelled")
			return
		}
	}
	if deltas {
		// Deltas go on the response's context: a cancel drops them
		// unwritten. The watchers' copy still runs (then).
		c.sendThen(r.ctx, then, events...)
		return
	}
	c.sendThen(c.ctx, then, events...)
}

// notice turns a failure the turn told before going on (its speech engine
// is off, so it answers in text) into an error event: the response did
// not fail. A failure nothing follows fails the response (see finish).
func (c *Conn) notice(r *response) []ev {
	c.mu.Lock()
	msg := r.failure
	r.failure = ""
	c.mu.Unlock()
	if msg == "" {
		return nil
	}
	return []ev{errorEvent(&clientError{code: "server_error", message: msg}, "")}
}

// textDelta renders a token of a text response; what is written is heard.
func (c *Conn) textDelta(r *response, delta string, then *func()) []ev {
	if delta == "" {
		return nil
	}
	events := c.open(r) // the first words announce the message item
	c.mu.Lock()
	r.text.WriteString(delta)
	c.mu.Unlock()
	*then = chain(func() {
		if r.ctx.Err() == nil {
			c.mu.Lock()
			r.heard.WriteString(delta)
			c.mu.Unlock()
		}
	}, *then)
	return append(events, ev{"type": "response.output_text.delta", "response_id": r.id, "item_id": r.itemID,
		"output_index": r.msgIndex, "content_index": 0, "delta": delta})
}

// audioDelta renders a sentence's audio: its transcript, then its sound in
// deltas. The sentence is heard once its last delta is written.
func (c *Conn) audioDelta(r *response, m protocol.Audio, then *func()) []ev {
	events := c.open(r)
	text := m.DisplayText.Text
	at := ev{"response_id": r.id, "item_id": r.itemID, "output_index": r.msgIndex, "content_index": 0}
	// The sentence is noted under the lock: a cancel or barge-in reads
	// what was heard (heardText) while the deltas are still going out.
	c.mu.Lock()
	r.text.WriteString(text)
	piece := r.encoder.sent(text)
	c.mu.Unlock()
	if text != "" {
		events = append(events, with(at, ev{"type": "response.output_audio_transcript.delta", "delta": text}))
	}
	var chunks []string
	if m.Audio != nil && *m.Audio != "" {
		var err error
		if chunks, err = r.encoder.encode(*m.Audio); err != nil {
			c.log.Warn("realtime: a sentence's audio could not be converted; its transcript goes alone", "err", err)
		}
	}
	for _, d := range chunks {
		events = append(events, with(at, ev{"type": "response.output_audio.delta", "delta": d}))
	}
	*then = chain(func() {
		if r.ctx.Err() == nil {
			c.mu.Lock()
			r.encoder.written(piece)
			c.mu.Unlock()
		}
	}, *then)
	return events
}

// chain runs a then b (either may be nil).
func chain(a, b func()) func() {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func() { a(); b() }
}

// isTurn reports whether a frame sent on ctx belongs to r's turn: the
// turn's chain-start names it, and every frame of the turn comes on its
// context.
func (r *response) isTurn(c *Conn, ctx context.Context, msg any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.turn == nil {
		if m, ok := msg.(protocol.Text); ok && m.Type == protocol.TypeControl && m.Text == protocol.ControlChainStart {
			r.turn = ctx
			return true
		}
		return false
	}
	return r.turn == ctx
}
