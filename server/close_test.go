package server_test

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/fakellm"
)

// closeFrames reads the raw frames koe sends until it closes the socket
// and returns the codes of its close frames.
func closeFrames(t *testing.T, c *client) []int {
	t.Helper()
	raw := c.ws.UnderlyingConn()
	_ = raw.SetReadDeadline(time.Now().Add(30 * time.Second))
	var codes []int
	head := make([]byte, 2)
	for {
		if _, err := io.ReadFull(raw, head); err != nil {
			return codes
		}
		n := int(head[1] & 0x7f)
		switch n {
		case 126:
			ext := make([]byte, 2)
			if _, err := io.ReadFull(raw, ext); err != nil {
				return codes
			}
			n = int(binary.BigEndian.Uint16(ext))
		case 127:
			ext := make([]byte, 8)
			if _, err := io.ReadFull(raw, ext); err != nil {
				return codes
			}
			n = int(binary.BigEndian.Uint64(ext))
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(raw, payload); err != nil {
			return codes
		}
		if head[0]&0x0f == websocket.CloseMessage && n >= 2 {
			codes = append(codes, int(binary.BigEndian.Uint16(payload)))
		}
	}
}

// Shutdown closes every session with 1001, "going away".
func TestShutdownCloseIs1001(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	c := dialGreeted(t, m.Addr())
	c.alive()
	go func() { _ = m.Close() }()
	for {
		_, err := c.read(30 * time.Second)
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || !strings.Contains(ce.Text, "shutting down") {
			t.Fatalf("at shutdown the client got %v, want 1001", err)
		}
		return
	}
}

// A message over four times server.max_message_bytes closes with 1009.
func TestTooBigCloseIs1009(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.MaxMessageBytes = 4096
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	// koe may close as soon as it has read the frame's length, before the
	// client has written all of it: the write's own error is no finding.
	_ = c.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"text-input","text":"`+strings.Repeat("x", 5*4096)+`"}`))
	for {
		_, err := c.read(30 * time.Second)
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
			t.Fatalf("an oversized message got %v, want 1009", err)
		}
		return
	}
}

// A client that stops answering pings is closed with 1000: koe is not
// going away (it used to say 1001, "server shutting down").
func TestUnresponsiveClientCloseIs1000(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.PingInterval = 50 * time.Millisecond
	cfg.Server.PongTimeout = 200 * time.Millisecond
	m := startKoe(t, cfg)
	// A bare client that never reads, so it never answers a ping.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/client-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	codes := closeFrames(t, &client{t: t, ws: ws})
	if len(codes) != 1 || codes[0] != websocket.CloseNormalClosure {
		t.Fatalf("close frames %v, want one with 1000", codes)
	}
}
