package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/fakellm"
)

// endlessListen is how long the client of the endless scenario listens.
const endlessListen = 90 * time.Second

func endlessScenario() scenario {
	return scenario{
		name: "endless",
		about: fmt.Sprintf("the LLM streams tokens as fast as it can and never ends a sentence or the reply; "+
			"one session asks once and reads everything for up to %s", endlessListen),
		respond: func(fakellm.Request) fakellm.Reply {
			return fakellm.Reply{Tokens: fakellm.Words("and so the story goes on and on "), Endless: true}
		},
		figure: "s until the turn ended",
		run:    runEndless,
	}
}

func runEndless(ctx context.Context, e *env) outcome {
	out := outcome{value: nan()}
	// koe.v1 asks for every token as well, as koe's own page does.
	ws, err := dialSession(ctx, e.koe.URL, "koe.v1")
	if err != nil {
		out.text = "could not connect: " + err.Error()
		return out
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"text-input","text":"Tell me a story."}`)); err != nil {
		out.text = "could not send: " + err.Error()
		return out
	}
	start := time.Now()
	h := listenWithin(ctx, ws, start, endlessListen, &out)
	took := time.Since(start)
	got := fmt.Sprintf("%.1f MiB in %d frames", float64(h.bytes)/(1<<20), h.frames)
	if h.ended {
		out.value = took.Seconds()
		out.text = fmt.Sprintf("turn ended after %.1f s; %s", took.Seconds(), got)
	} else {
		out.text = fmt.Sprintf("NO END in %.0f s; %s", took.Seconds(), got)
	}
	if h.errText != "" {
		out.text += fmt.Sprintf("; error: %q", clip(h.errText, 120))
	} else {
		out.text += "; no error frame"
	}
	return out
}
