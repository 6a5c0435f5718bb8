package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/fakellm"
)

// The hostile LLM's floods are capped, so that a koe that reads them whole
// (one from before the read limits) still ends in bounded time and memory.
const (
	hugeTokenBytes  = 64 << 20  // one token in one stream line
	endlessBytes    = 256 << 20 // one stream line with no newline
	errorPageBytes  = 5 << 20   // the body of an HTTP 500
	hostileListen   = 200 * time.Second
	eventHead       = `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`
	restartTurns    = 40
	restartTurnWait = 60 * time.Second
)

func hugeTokenScenario() scenario {
	return hostileLLMScenario("llm-token",
		fmt.Sprintf("the LLM sends one token of %d MiB in one stream line", hugeTokenBytes>>20),
		&fakellm.Flood{Head: eventHead, Fill: "hello ", Size: hugeTokenBytes, Tail: `"}}]}` + "\n\n"})
}

func endlessLineScenario() scenario {
	return hostileLLMScenario("llm-line",
		fmt.Sprintf("the LLM sends a stream line with no newline, %d MiB long, then ends", endlessBytes>>20),
		&fakellm.Flood{Head: "data: {", Fill: "x", Size: endlessBytes})
}

func errorPageScenario() scenario {
	return hostileLLMScenario("llm-error",
		fmt.Sprintf("the LLM answers HTTP 500 with an OpenAI-style error whose message is %d MiB long", errorPageBytes>>20),
		&fakellm.Flood{
			Status: http.StatusInternalServerError, ContentType: "application/json",
			Head: `{"error":{"type":"server_error","message":"`, Fill: "Internal error. ", Size: errorPageBytes, Tail: `"}}`,
		})
}

// hostileLLMScenario asks one question of a koe whose LLM answers with
// flood, and reports how long the turn took to fail, what the client was
// told and how much of the flood koe took.
func hostileLLMScenario(name, about string, flood *fakellm.Flood) scenario {
	return scenario{
		name:    name,
		about:   about + "; one session asks once: how long the turn takes to fail, and the error frame",
		respond: func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Flood: flood} },
		figure:  "s until the turn failed",
		format:  "%.2f",
		run:     runHostileLLM,
	}
}

func runHostileLLM(ctx context.Context, e *env) outcome {
	out := outcome{value: nan()}
	ws, err := dialSession(ctx, e.koe.URL)
	if err != nil {
		out.text = "could not connect: " + err.Error()
		return out
	}
	defer ws.Close()
	logBefore := e.koe.LogSize()
	start := time.Now()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"text-input","text":"Hello?"}`)); err != nil {
		out.text = "could not send: " + err.Error()
		return out
	}
	h := listenWithin(ctx, ws, start, hostileListen, &out)
	took := time.Since(start)
	sent := fmt.Sprintf("%.1f MiB of the flood sent", float64(e.koe.LLM.Flooded())/(1<<20))
	switch {
	case !h.ended:
		out.text = fmt.Sprintf("NO END in %.0f s; %s", took.Seconds(), sent)
	case h.errText == "":
		out.text = fmt.Sprintf("turn ended after %.2f s without an error frame; %s", took.Seconds(), sent)
	default:
		out.value = took.Seconds()
		out.text = fmt.Sprintf("turn failed after %.2f s; %s; error frame %s, log grew %s: %q",
			took.Seconds(), sent, size(int64(h.errFrame)), size(e.koe.LogSize()-logBefore), clip(h.errText, 150))
	}
	return out
}

func staleConnectionScenario() scenario {
	return scenario{
		name: "llm-reset",
		about: fmt.Sprintf("the LLM resets every kept-alive connection koe reuses, as a server that restarted does; "+
			"one session takes %d turns: how many fail", restartTurns),
		respond: fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Sure, here you are.")}),
		figure:  "turns failed",
		format:  "%.0f",
		run:     runStaleConnections,
	}
}

func runStaleConnections(ctx context.Context, e *env) outcome {
	out := outcome{value: nan()}
	e.koe.LLM.SetResetReused(true)
	ws, err := dialSession(ctx, e.koe.URL)
	if err != nil {
		out.text = "could not connect: " + err.Error()
		return out
	}
	defer ws.Close()
	failed, done := 0, 0
	var firstErr string
	for i := 0; i < restartTurns && ctx.Err() == nil; i++ {
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"text-input","text":"Hello?"}`)); err != nil {
			out.issues = append(out.issues, "could not send: "+err.Error())
			break
		}
		h := listenTurn(ws, time.Now().Add(restartTurnWait))
		switch {
		case h.broke != nil:
			out.issues = append(out.issues, fmt.Sprintf("turn %d: the connection broke: %v", i+1, h.broke))
		case h.timedOut:
			out.issues = append(out.issues, fmt.Sprintf("turn %d: no end in %s", i+1, restartTurnWait))
		}
		if !h.ended {
			break
		}
		done++
		if h.errText != "" {
			failed++
			if firstErr == "" {
				firstErr = h.errText
			}
		}
	}
	out.value = float64(failed)
	out.text = fmt.Sprintf("%d of %d turns failed; the LLM reset %d requests on kept-alive connections", failed, done, e.koe.LLM.Resets())
	if firstErr != "" {
		out.text += fmt.Sprintf("; first error: %q", clip(firstErr, 140))
	}
	return out
}
