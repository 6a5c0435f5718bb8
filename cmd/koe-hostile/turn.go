package main

import (
	"context"
	"time"

	"github.com/gorilla/websocket"
)

// heard is what a client saw of one turn.
type heard struct {
	ended         bool   // the chain ended (control conversation-chain-end)
	errText       string // the first error frame's message, if any
	errFrame      int    // that frame's size in bytes
	bytes, frames int    // everything koe sent
	broke         error  // the connection broke before the deadline
	timedOut      bool   // the deadline passed first
}

// listenTurn reads what koe sends until the turn's chain ends or the
// deadline passes, answering as a client that has played each piece of
// audio at once: koe waits for that before it ends a turn with speech.
func listenTurn(ws *websocket.Conn, deadline time.Time) heard {
	var h heard
	for !h.ended {
		m, raw, err := readFrame(ws, deadline)
		if err != nil {
			if time.Now().Before(deadline) {
				h.broke = err
			} else {
				h.timedOut = true
			}
			return h
		}
		h.bytes += len(raw)
		h.frames++
		switch {
		case m.Type == "error" && h.errText == "":
			h.errText, h.errFrame = m.Message, len(raw)
		case m.Type == "backend-synth-complete":
			_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"frontend-playback-complete"}`))
		case m.Type == "control" && m.Text == "conversation-chain-end":
			h.ended = true
		}
	}
	return h
}

// listenWithin is listenTurn until listen has passed since start, or ctx
// ends if sooner; a connection that broke is one of out's issues.
func listenWithin(ctx context.Context, ws *websocket.Conn, start time.Time, listen time.Duration, out *outcome) heard {
	deadline := start.Add(listen)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	h := listenTurn(ws, deadline)
	if h.broke != nil {
		out.issues = append(out.issues, "the connection broke: "+h.broke.Error())
	}
	return h
}
