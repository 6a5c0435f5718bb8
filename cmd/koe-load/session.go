package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// subprotocol is koe's own (protocol.Subprotocol): a client offering it
// also gets a token frame for every LLM delta.
const subprotocol = "koe.v1"

type session struct {
	ws *websocket.Conn
}

// dialAll opens n sessions, a bounded number at a time, and reads each
// one's connect sequence.
func dialAll(o options, url string) ([]*session, []error) {
	var (
		mu       sync.Mutex
		sessions []*session
		errs     []error
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, o.dialRate)
	dialer := o.dialer()
	for i := 0; i < o.n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ws, resp, err := dialer.Dial(url, o.dialHeader())
			err = explainDial(err, resp)
			if err == nil {
				err = readGreeting(ws)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				if ws != nil {
					_ = ws.Close()
				}
				return
			}
			sessions = append(sessions, &session{ws: ws})
		}()
	}
	wg.Wait()
	return sessions, errs
}

func readGreeting(ws *websocket.Conn) error {
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer ws.SetReadDeadline(time.Time{})
	for i := 0; i < 5; i++ {
		if _, _, err := ws.ReadMessage(); err != nil {
			return fmt.Errorf("connect sequence: %w", err)
		}
	}
	return nil
}

type result struct {
	firstAudio time.Duration
	total      time.Duration
	audios     int
	err        error
	// started: koe began the turn (conversation-chain-start came).
	started bool
}

// turn sends one text input and plays the OLV client until chain-end.
func (s *session) turn(text string, timeout time.Duration) result {
	var r result
	_ = s.ws.SetReadDeadline(time.Now().Add(timeout))
	data, _ := json.Marshal(map[string]any{"type": "text-input", "text": text, "images": []any{}})
	start := time.Now()
	if err := s.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		r.err = err
		return r
	}
	for {
		_, raw, err := s.ws.ReadMessage()
		if err != nil {
			r.err = err
			return r
		}
		var m struct{ Type, Text, Message string }
		if err := json.Unmarshal(raw, &m); err != nil {
			r.err = err
			return r
		}
		switch m.Type {
		case "audio":
			if r.audios == 0 {
				r.firstAudio = time.Since(start)
			}
			r.audios++
		case "backend-synth-complete":
			if err := s.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"frontend-playback-complete"}`)); err != nil {
				r.err = err
				return r
			}
		case "error":
			r.err = errors.New(m.Message)
			return r
		case "control":
			if m.Text == "conversation-chain-start" {
				r.started = true
			}
			if m.Text == "conversation-chain-end" {
				r.total = time.Since(start)
				if r.audios == 0 {
					r.err = errors.New("turn ended without audio")
				}
				return r
			}
		}
	}
}
