package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// echoTypeBytes is the size of the message type the echo scenario sends:
// under the default server.max_message_bytes (8 MiB), so koe reads it.
const echoTypeBytes = 7 << 20

func echoScenario() scenario {
	return scenario{
		name:   "echo",
		about:  `one message {"type":"xxx…"} whose type is 7 MiB long: how much of it comes back in the error, and goes into the log`,
		figure: "bytes in the error frame",
		format: "%.0f",
		run:    runEcho,
	}
}

func runEcho(ctx context.Context, e *env) outcome {
	out := outcome{value: nan()}
	ws, err := dialSession(ctx, e.koe.URL)
	if err != nil {
		out.text = "could not connect: " + err.Error()
		return out
	}
	defer ws.Close()
	logBefore := e.koe.LogSize()
	msg := `{"type":"` + strings.Repeat("x", echoTypeBytes) + `"}`
	_ = ws.SetWriteDeadline(time.Now().Add(frameTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		out.text = "could not send: " + err.Error()
		return out
	}
	// The heartbeat's ack comes after koe has dealt with the message
	// before it, log line included.
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"heartbeat"}`)); err != nil {
		out.text = "could not send: " + err.Error()
		return out
	}
	errFrame, frames := -1, 0
	deadline := time.Now().Add(frameTimeout)
	for {
		m, raw, err := readFrame(ws, deadline)
		if err != nil {
			out.issues = append(out.issues, "reading: "+err.Error())
			break
		}
		frames++
		if m.Type == "error" && errFrame < 0 {
			errFrame = len(raw)
			out.issues = append(out.issues, "error frame: "+clip(string(raw), 160))
		}
		if m.Type == "heartbeat-ack" {
			break
		}
	}
	grew := e.koe.LogSize() - logBefore
	if errFrame < 0 {
		out.text = fmt.Sprintf("no error frame (%d frames); log grew %s", frames, size(grew))
		return out
	}
	out.value = float64(errFrame)
	out.text = fmt.Sprintf("error frame %s; log grew %s", size(int64(errFrame)), size(grew))
	return out
}

// size writes a byte count for people.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 10<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
