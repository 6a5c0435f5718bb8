package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

const rateBombSessions = 200

// supportedRates are rates every koe accepts; the bomb mixes a few of them
// in, so that the refusals it counts are the odd rates'.
var supportedRates = []int{8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 96000, 192000}

func rateBombScenario() scenario {
	return scenario{
		name: "rate-bomb",
		about: fmt.Sprintf("%d sessions at once, each declaring its own sample rate (44057+2i, and %d supported ones) "+
			"and sending one 90-byte PCM frame: the resampler filters koe builds", rateBombSessions, len(supportedRates)),
		figure: "sessions refused",
		format: "%.0f",
		run:    runRateBomb,
	}
}

// bombRate is session i's sample rate: mostly odd rates next to 44.1 kHz
// (odd, so that none is a supported rate by chance), every twentieth a
// supported one.
func bombRate(i int) int {
	if i%(rateBombSessions/len(supportedRates)) == 0 {
		return supportedRates[i/(rateBombSessions/len(supportedRates))%len(supportedRates)]
	}
	return 44057 + 2*i
}

type bombResult struct {
	refused bool   // koe answered with an error frame
	errText string // its text
	err     error  // the session broke or timed out
}

func runRateBomb(ctx context.Context, e *env) outcome {
	results := make([]bombResult, rateBombSessions)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []*websocket.Conn
	)
	defer func() {
		for _, ws := range conns {
			_ = ws.Close()
		}
	}()
	sem := make(chan struct{}, dialParallel)
	for i := range results {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := dialSession(ctx, e.koe.URL)
			<-sem
			if err != nil {
				results[i].err = err
				return
			}
			mu.Lock()
			conns = append(conns, ws)
			mu.Unlock()
			results[i] = bomb(ws, bombRate(i))
		}()
	}
	wg.Wait()

	var refused, broken, supported int
	var firstErr, firstBreak string
	for i, r := range results {
		if slices.Contains(supportedRates, bombRate(i)) {
			supported++
		}
		switch {
		case r.err != nil:
			broken++
			if firstBreak == "" {
				firstBreak = r.err.Error()
			}
		case r.refused:
			refused++
			if firstErr == "" {
				firstErr = r.errText
			}
		}
	}
	out := outcome{
		value: float64(refused),
		text:  fmt.Sprintf("%d of %d refused with an error frame (%d rates were supported ones)", refused, rateBombSessions, supported),
	}
	if broken > 0 {
		out.text += fmt.Sprintf("; %d broke or got no answer: %s", broken, clip(firstBreak, 80))
	}
	if firstErr != "" {
		out.issues = append(out.issues, "error frame: "+clip(firstErr, 160))
	}
	return out
}

// bomb declares rate, sends 45 samples of PCM and a heartbeat; koe handles
// one session's messages in order, so its heartbeat-ack says it has dealt
// with the other two.
func bomb(ws *websocket.Conn, rate int) bombResult {
	var r bombResult
	config := fmt.Sprintf(`{"type":"raw-audio-config","sample_rate":%d}`, rate)
	pcm := make([]byte, 90)
	for i := range pcm {
		pcm[i] = byte(i * 7)
	}
	_ = ws.SetWriteDeadline(time.Now().Add(frameTimeout))
	for _, m := range []struct {
		kind int
		data []byte
	}{
		{websocket.TextMessage, []byte(config)},
		{websocket.BinaryMessage, pcm},
		{websocket.TextMessage, []byte(`{"type":"heartbeat"}`)},
	} {
		if err := ws.WriteMessage(m.kind, m.data); err != nil {
			r.err = err
			return r
		}
	}
	deadline := time.Now().Add(frameTimeout)
	for {
		m, _, err := readFrame(ws, deadline)
		if err != nil {
			r.err = err
			return r
		}
		switch m.Type {
		case "error":
			if !r.refused {
				r.refused, r.errText = true, m.Message
			}
		case "heartbeat-ack":
			return r
		}
	}
}
