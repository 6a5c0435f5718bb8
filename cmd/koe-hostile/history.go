package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/fakellm"
	"koe/testkit/loadrun"
)

const (
	historyTurns    = 30
	imagesPerTurn   = 4
	imageBytes      = 1536 << 10 // 1.5 MiB
	historyFetchers = 4
	// historyTurnTimeout bounds one turn: sending 8 MiB and the reply.
	historyTurnTimeout = 2 * time.Minute
)

func historyScenario() scenario {
	return scenario{
		name: "history",
		about: fmt.Sprintf("one session puts %d turns with %d images of 1.5 MiB each into a history; then %d sessions "+
			"open that history at once (fetch-and-set-history)", historyTurns, imagesPerTurn, historyFetchers),
		// Four such images are 8 MiB of base64: more than the default
		// server.max_message_bytes.
		config:  []setting{{"server.max_message_bytes", "16777216"}},
		respond: fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("What a nice picture.")}),
		figure:  "MiB largest frame",
		format:  "%.2f",
		run:     runHistory,
	}
}

func runHistory(ctx context.Context, e *env) outcome {
	out := outcome{value: nan()}
	uid, err := fillHistory(ctx, e)
	if err != nil {
		out.text = err.Error()
		return out
	}
	turns := loadrun.ReadUsage(e.koe.PID)
	startRSS := e.before.RSS
	// An older koe may never let go of the session; the fetches go on.
	settle, cancel := context.WithTimeout(ctx, settleTimeout)
	n, err := e.waitSessions(settle, func(n int) bool { return n == 0 })
	cancel()
	if err != nil {
		out.issues = append(out.issues, fmt.Sprintf("koe still counted %d sessions %s after the writing session left", n, settleTimeout))
	}
	// The row's before, peak and after are those of the fetches.
	e.mark()

	type fetch struct {
		largest int
		took    time.Duration
		err     error
	}
	fetches := make([]fetch, historyFetchers)
	var wg sync.WaitGroup
	for i := range fetches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			fetches[i].largest, fetches[i].err = fetchHistory(ctx, e.koe.URL, uid)
			fetches[i].took = time.Since(start)
		}()
	}
	wg.Wait()
	largest, ok := 0, 0
	var slowest time.Duration
	for _, f := range fetches {
		largest = max(largest, f.largest)
		if f.err != nil {
			out.issues = append(out.issues, "fetch: "+f.err.Error())
			continue
		}
		ok++
		slowest = max(slowest, f.took)
	}
	out.value = float64(largest) / (1 << 20)
	out.text = fmt.Sprintf("%d turns stored: RSS %s → %s (%s of it mapped files), peak %s; %d of %d fetches got history-data, slowest %.1f s; largest frame %.2f MiB",
		historyTurns, mib(startRSS), mib(turns.RSS), mib(turns.File), mib(turns.HWM), ok, historyFetchers, slowest.Seconds(), out.value)
	return out
}

// fillHistory runs the turns with images and returns the history's uid.
func fillHistory(ctx context.Context, e *env) (string, error) {
	ws, err := dialSession(ctx, e.koe.URL)
	if err != nil {
		return "", fmt.Errorf("could not connect: %w", err)
	}
	defer ws.Close()
	for turn := 0; turn < historyTurns; turn++ {
		msg, err := imageTurn(turn)
		if err != nil {
			return "", err
		}
		if err := runTurn(ws, msg); err != nil {
			return "", fmt.Errorf("turn %d: %w", turn+1, err)
		}
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"fetch-history-list"}`)); err != nil {
		return "", err
	}
	deadline := time.Now().Add(frameTimeout)
	for {
		m, raw, err := readFrame(ws, deadline)
		if err != nil {
			return "", fmt.Errorf("fetch-history-list: %w", err)
		}
		if m.Type != "history-list" {
			continue
		}
		var list struct {
			Histories []struct {
				UID string `json:"uid"`
			} `json:"histories"`
		}
		if err := json.Unmarshal(raw, &list); err != nil || len(list.Histories) == 0 {
			return "", fmt.Errorf("history-list without a history: %.200s", raw)
		}
		return list.Histories[0].UID, nil
	}
}

// imageTurn is a text-input with imagesPerTurn PNG images. Each is a PNG
// signature, which is what koe's content check looks at, and then bytes
// that differ from every other image, so that nothing can be shared.
func imageTurn(turn int) ([]byte, error) {
	type image struct {
		Source   string `json:"source"`
		Data     string `json:"data"`
		MimeType string `json:"mime_type"`
	}
	msg := struct {
		Type   string  `json:"type"`
		Text   string  `json:"text"`
		Images []image `json:"images"`
	}{Type: "text-input", Text: fmt.Sprintf("Look at these, part %d.", turn+1)}
	for i := 0; i < imagesPerTurn; i++ {
		raw := make([]byte, imageBytes)
		copy(raw, "\x89PNG\r\n\x1a\n")
		rng := rand.New(rand.NewPCG(uint64(turn), uint64(i)))
		for j := 8; j+8 <= len(raw); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				raw[j+k] = byte(v >> (8 * k))
			}
		}
		msg.Images = append(msg.Images, image{
			Source:   "upload",
			Data:     "data:image/png;base64," + base64.StdEncoding.EncodeToString(raw),
			MimeType: "image/png",
		})
	}
	return json.Marshal(msg)
}

// runTurn sends one input and plays the client until the turn ends; an
// error frame (an image refused, say) fails it.
func runTurn(ws *websocket.Conn, msg []byte) error {
	_ = ws.SetWriteDeadline(time.Now().Add(historyTurnTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, msg); err != nil {
		return err
	}
	deadline := time.Now().Add(historyTurnTimeout)
	for {
		m, _, err := readFrame(ws, deadline)
		if err != nil {
			return err
		}
		switch {
		case m.Type == "error":
			return fmt.Errorf("koe refused it: %s", clip(m.Message, 200))
		case m.Type == "backend-synth-complete":
			if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"frontend-playback-complete"}`)); err != nil {
				return err
			}
		case m.Type == "control" && m.Text == "conversation-chain-end":
			return nil
		}
	}
}

// fetchHistory opens a session, asks for the history and reads until its
// history-data; it returns the largest frame it received.
func fetchHistory(ctx context.Context, url, uid string) (int, error) {
	ws, err := dialSession(ctx, url)
	if err != nil {
		return 0, err
	}
	defer ws.Close()
	req, _ := json.Marshal(map[string]string{"type": "fetch-and-set-history", "history_uid": uid})
	if err := ws.WriteMessage(websocket.TextMessage, req); err != nil {
		return 0, err
	}
	largest := 0
	deadline := time.Now().Add(historyTurnTimeout)
	for {
		m, raw, err := readFrame(ws, deadline)
		largest = max(largest, len(raw))
		if err != nil {
			return largest, err
		}
		switch m.Type {
		case "history-data":
			return largest, nil
		case "error":
			return largest, errors.New("error frame: " + clip(m.Message, 200))
		}
	}
}
