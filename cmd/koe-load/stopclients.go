package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"koe/client"
	"koe/protocol"
)

// The frames a watcher of stop-latency looks for. It compares them whole
// or by their beginning, never decoding: 50 watchers decoding every frame
// would measure koe-load, which shares the cores with koe.
var (
	frameChainStart = []byte(`{"type":"control","text":"conversation-chain-start"}`)
	frameInterrupt  = []byte(`{"type":"control","text":"interrupt"}`)
	frameAudio      = []byte(`{"type":"audio",`)
)

// watchEvent is what a watcher saw of a turn, and when.
type watchEvent struct {
	watcher   int
	interrupt bool // false: the turn's first audio
	at        time.Time
}

// dialWatcher connects a watcher (query watch_conf=… or watch=…) and reads
// its greeting, which ends with the character's set-model-and-conf.
func dialWatcher(wsURL, query string, koeEvents bool, within time.Duration) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: within}
	if koeEvents {
		d.Subprotocols = []string{subprotocol}
	}
	ws, _, err := d.Dial(wsURL+"?"+query, nil)
	if err != nil {
		return nil, fmt.Errorf("watcher %s: %w", query, err)
	}
	if _, err := readUntil(ws, within, func(m map[string]any) bool { return m["type"] == protocol.TypeSetModelAndConf }); err != nil {
		_ = ws.Close()
		return nil, fmt.Errorf("watcher %s greeting: %w", query, err)
	}
	return ws, nil
}

// readUntil reads frames until stop holds for one, and returns that one.
func readUntil(ws *websocket.Conn, within time.Duration, stop func(map[string]any) bool) (map[string]any, error) {
	_ = ws.SetReadDeadline(time.Now().Add(within))
	defer ws.SetReadDeadline(time.Time{})
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("a frame is not JSON: %w", err)
		}
		if stop(m) {
			return m, nil
		}
	}
}

// follow reads watcher i's frames until its connection closes and reports
// each turn's first audio and its interrupt, unless quit is closed. Frames
// of a turn that come after its interrupt, or a second interrupt, are
// counted in stray: a watcher would show them after it was told the turn
// had stopped.
func follow(ws *websocket.Conn, i int, events chan<- watchEvent, quit <-chan struct{}, stray *atomic.Int64) {
	report := func(ev watchEvent) bool {
		select {
		case events <- ev:
			return true
		case <-quit:
			return false
		}
	}
	started, playing := false, false
	for {
		_, data, err := ws.ReadMessage()
		at := time.Now()
		if err != nil {
			return
		}
		switch {
		case bytes.Equal(data, frameChainStart):
			started, playing = true, false
		case bytes.HasPrefix(data, frameAudio):
			switch {
			case !started:
				stray.Add(1)
			case !playing:
				playing = true
				if !report(watchEvent{watcher: i, at: at}) {
					return
				}
			}
		case bytes.Equal(data, frameInterrupt):
			if !started {
				stray.Add(1)
				continue
			}
			started = false
			if !report(watchEvent{watcher: i, interrupt: true, at: at}) {
				return
			}
		}
	}
}

// awaitFollowed returns once the instance at speakerURL knows what the
// watchers of the instance at watchURL follow. Each instance tells the
// others through Redis, characters before clients; a watcher of the
// speaking client is greeted by the speaker's instance once that has
// heard it, so by then it has heard of the character's watchers too.
func awaitFollowed(watchURL, clientUID string, within time.Duration) error {
	ws, err := dialWatcher(watchURL, "watch="+url.QueryEscape(clientUID), false, within)
	if err != nil {
		return fmt.Errorf("a watcher of the speaker on another instance was not greeted: %w", err)
	}
	return ws.Close()
}

// speaker is the WebSocket client whose turns are stopped.
type speaker struct {
	ws      *websocket.Conn
	conf    string // the character it talks to
	history string // the history its turns go to
	ended   chan struct{}

	mu      sync.Mutex
	lastErr string // the last error frame koe sent it
}

// dialSpeaker connects the speaking client, reads its connect sequence,
// opens a new history for its turns and reads what koe sends it from
// then on, until Close.
func dialSpeaker(wsURL, clientUID string, within time.Duration) (*speaker, error) {
	d := websocket.Dialer{HandshakeTimeout: within}
	ws, _, err := d.Dial(wsURL+"?client_uid="+url.QueryEscape(clientUID), nil)
	if err != nil {
		return nil, fmt.Errorf("speaker: %w", err)
	}
	s := &speaker{ws: ws, ended: make(chan struct{})}
	fail := func(what string, err error) (*speaker, error) {
		_ = ws.Close()
		return nil, fmt.Errorf("speaker %s: %w", what, err)
	}
	if _, err := readUntil(ws, within, func(m map[string]any) bool {
		if m["type"] == protocol.TypeSetModelAndConf {
			s.conf, _ = m["conf_uid"].(string)
		}
		return m["type"] == protocol.TypeControl && m["text"] == protocol.ControlStartMic
	}); err != nil {
		return fail("connect sequence", err)
	}
	if s.conf == "" {
		return fail("connect sequence", errors.New("no set-model-and-conf naming the character"))
	}
	if err := s.send(map[string]any{"type": "create-new-history"}); err != nil {
		return fail("create-new-history", err)
	}
	created, err := readUntil(ws, within, func(m map[string]any) bool { return m["type"] == protocol.TypeNewHistoryCreated })
	if err != nil {
		return fail("create-new-history", err)
	}
	if s.history, _ = created["history_uid"].(string); s.history == "" {
		return fail("create-new-history", errors.New("no history_uid"))
	}
	go s.read()
	return s, nil
}

// read takes what koe sends the speaker, keeping the last error, so that
// koe never waits for it; it ends when the connection closes.
func (s *speaker) read() {
	defer close(s.ended)
	errFrame := []byte(`{"type":"error",`)
	for {
		_, data, err := s.ws.ReadMessage()
		if err != nil {
			return
		}
		if bytes.HasPrefix(data, errFrame) {
			s.mu.Lock()
			s.lastErr = string(data)
			s.mu.Unlock()
		}
	}
}

func (s *speaker) send(m map[string]any) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.ws.WriteMessage(websocket.TextMessage, data)
}

// say starts a turn.
func (s *speaker) say(text string) error {
	return s.send(map[string]any{"type": "text-input", "text": text, "images": []any{}})
}

// interrupt stops the speaker's turn as a client does: what it heard.
func (s *speaker) interrupt(heard string) error {
	return s.send(map[string]any{"type": "interrupt-signal", "text": heard})
}

// lastError is the last error frame koe sent the speaker, or "".
func (s *speaker) lastError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Close closes the connection and waits for its reader.
func (s *speaker) Close() {
	_ = s.ws.Close()
	<-s.ended
}

// chatTurn is a chat API turn (POST /api/chat/stream) read to its end.
type chatTurn struct {
	history chan string // the turn's history, once its first message says it
	done    chan error  // the stream ended (nil: with its end event)
}

// startChatTurn runs a chat API turn in a goroutine of its own, which
// ends when the stream does or ctx ends.
func startChatTurn(ctx context.Context, c *client.Client, req protocol.ChatRequest) *chatTurn {
	t := &chatTurn{history: make(chan string, 1), done: make(chan error, 1)}
	go func() {
		said := false
		for ev, err := range c.Stream(ctx, req) {
			if err != nil {
				t.done <- err
				return
			}
			if m := ev.Message; !said && m != nil && m.AdditionalKwargs.HistoryUID != "" {
				said = true
				t.history <- m.AdditionalKwargs.HistoryUID
			}
		}
		t.done <- nil
	}()
	return t
}
