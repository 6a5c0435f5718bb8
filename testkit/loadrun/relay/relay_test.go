package relay

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/protocol"
	"koe/testkit/fakellm"
)

// hangGuard bounds every wait; nothing is asserted about speed.
const hangGuard = 30 * time.Second

func startRelay(t *testing.T, reply string) (*Relay, *fakellm.Server) {
	t.Helper()
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	r, err := Start("127.0.0.1:0", Options{LLMBaseURL: llm.URL(), Model: fakellm.ModelID, APIKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r, llm
}

type frame struct {
	Type        string
	Text        string
	Content     string
	Message     string
	Audio       *string
	DisplayText struct{ Text string } `json:"display_text"`
}

func dial(t *testing.T, url string, subprotocols ...string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: hangGuard, Subprotocols: subprotocols}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	_ = ws.SetReadDeadline(time.Now().Add(hangGuard))
	return ws
}

func read(t *testing.T, ws *websocket.Conn) frame {
	t.Helper()
	_, data, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("frame %s: %v", data, err)
	}
	return f
}

func write(t *testing.T, ws *websocket.Conn, msg string) {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// playTurn plays the OLV client through one text turn and returns every
// frame from chain-start to chain-end.
func playTurn(t *testing.T, ws *websocket.Conn, text string) []frame {
	t.Helper()
	data, _ := json.Marshal(map[string]string{"type": protocol.TypeTextInput, "text": text})
	write(t, ws, string(data))
	var got []frame
	for {
		f := read(t, ws)
		got = append(got, f)
		switch {
		case f.Type == protocol.TypeBackendSynthComplete:
			write(t, ws, `{"type":"frontend-playback-complete"}`)
		case f.Type == protocol.TypeControl && f.Text == protocol.ControlChainEnd:
			return got
		case f.Type == protocol.TypeError:
			t.Fatalf("error frame: %s", f.Message)
		}
	}
}

func sequence(frames []frame) []string {
	var out []string
	for _, f := range frames {
		s := f.Type
		switch f.Type {
		case protocol.TypeControl, protocol.TypeFullText:
			s += ":" + f.Text
		case protocol.TypeAudio:
			s += ":" + f.DisplayText.Text
		case protocol.TypeToken:
			s += ":" + f.Content
		}
		out = append(out, s)
	}
	return out
}

func TestTurnOverLoopback(t *testing.T) {
	r, llm := startRelay(t, "Sure, I can help. Is that all? Fine!")
	ws := dial(t, r.URL())

	var greeting []string
	for range 5 {
		greeting = append(greeting, read(t, ws).Type)
	}
	wantGreeting := []string{protocol.TypeGroupUpdate, protocol.TypeFullText, protocol.TypeSetModelAndConf,
		protocol.TypeGroupUpdate, protocol.TypeControl}
	if !slices.Equal(greeting, wantGreeting) {
		t.Fatalf("greeting %v, want %v", greeting, wantGreeting)
	}

	// Two turns on one connection: the second must not see the first's
	// playback-complete, and each is a whole OLV turn.
	for _, text := range []string{"Can you help me?", "Again?"} {
		frames := playTurn(t, ws, text)
		want := []string{
			"control:conversation-chain-start", "full-text:Thinking...",
			"audio:Sure,", "audio:I can help.", "audio:Is that all?", "audio:Fine!",
			"backend-synth-complete", "force-new-message", "control:conversation-chain-end",
		}
		if got := sequence(frames); !slices.Equal(got, want) {
			t.Errorf("turn %q:\n got %q\nwant %q", text, got, want)
		}
		for _, f := range frames {
			if f.Type == protocol.TypeAudio && f.Audio != nil {
				t.Errorf("audio frame with audio %q, want null (text only)", *f.Audio)
			}
		}
	}
	reqs := llm.Requests()
	if len(reqs) != 2 || reqs[1].UserWords() != "Again?" || !reqs[1].Stream {
		t.Errorf("LLM requests %+v, want two streamed ones, the second with the user's text", reqs)
	}
}

// A client that offers koe's subprotocol gets every delta as a token
// frame, as koe sends them; a piece still ends mid-stream.
func TestTokensForKoeClients(t *testing.T) {
	r, _ := startRelay(t, "Hello there. Bye")
	ws := dial(t, r.URL(), protocol.Subprotocol)
	if ws.Subprotocol() != protocol.Subprotocol {
		t.Fatalf("subprotocol %q", ws.Subprotocol())
	}
	for range 5 {
		read(t, ws)
	}
	got := sequence(playTurn(t, ws, "hi"))
	want := []string{
		"control:conversation-chain-start", "full-text:Thinking...",
		"token:Hello", "token: there.", "audio:Hello there.", "token: Bye",
		"audio:Bye", "backend-synth-complete", "force-new-message", "control:conversation-chain-end",
	}
	if !slices.Equal(got, want) {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
}

// Close ends connections that sit idle in their read loop: fasthttp does
// not close hijacked connections by itself.
func TestCloseEndsIdleConnections(t *testing.T) {
	r, _ := startRelay(t, "Hi.")
	ws := dial(t, r.URL())
	for range 5 {
		read(t, ws)
	}
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Error("the connection stayed open after Close")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Close did not return with a connection open")
	}
}
