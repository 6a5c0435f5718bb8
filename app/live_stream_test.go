package app_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/internal/wavio"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/ircdtest"
)

// The live chat's turns as their audiences see them: a live reply stopped
// while it is still being heard (a skip, the streamer talking over it)
// ends as an interrupt for its watchers and is stored as heard; a watcher
// that asked for koe's events gets them for live turns too.

// liveReply is what startLiveKoe's fake LLM answers a viewer, and
// summaryReply what it answers anything else (the streamer's own turn).
const (
	liveReply    = "Thank you for the message. See you soon."
	summaryReply = "A summary."
)

// longPiece is how long each piece of speech lasts once speakSlowly has
// been called. A reply stopped after all its pieces went out has then
// been heard only in part: its first piece, however loaded the machine,
// unless the stop comes this long after the first piece went out.
const longPiece = 20 * time.Second

// speakSlowly makes the fake speech server answer every sentence with
// longPiece of audio: a low-rate tone, so that the frames stay small.
func speakSlowly(t testing.TB, llm *fakellm.Server) {
	t.Helper()
	const rate = 8000
	samples := make([]int16, int(longPiece.Seconds())*rate)
	for i := range samples {
		// A 500 Hz square wave: loud enough to never read as silence.
		if i%16 < 8 {
			samples[i] = 6000
		} else {
			samples[i] = -6000
		}
	}
	wav, err := wavio.EncodeMono16(samples, rate)
	if err != nil {
		t.Fatal(err)
	}
	llm.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply { return fakellm.SpeechReply{Body: wav} })
}

// liveCounts are the counts of GET /api/live these tests check, read from
// its JSON as a dashboard reads them.
type liveCounts struct {
	Running   bool   `json:"running"`
	Queued    int    `json:"queued"`
	Turns     uint64 `json:"turns"`
	Spoken    uint64 `json:"spoken"`
	Skipped   uint64 `json:"skipped"`
	Yielded   uint64 `json:"yielded"`
	Failed    uint64 `json:"failed"`
	LastError string `json:"last_error"`
}

// waitTurnOver polls GET /api/live until turns live turns have ended and
// nothing waits.
func (k *liveKoe) waitTurnOver(what string, turns uint64) liveCounts {
	k.t.Helper()
	return testkit.Await(k.t, what, func() (liveCounts, bool) {
		var c liveCounts
		k.call(http.MethodGet, "/api/live", &c)
		return c, c.Turns == turns && !c.Running && c.Queued == 0
	})
}

// allPiecesSent reads the OLV watcher up to the reply's
// backend-synth-complete (every piece has gone out; the live turn now
// waits for them to be heard) and returns the pieces' display texts.
func (k *liveKoe) allPiecesSent() []string {
	k.t.Helper()
	var pieces []string
	for _, f := range k.watchUntil("backend-synth-complete", "") {
		if f.Type == "audio" && f.Audio != "" && f.DisplayText != nil {
			pieces = append(pieces, strings.TrimSpace(f.DisplayText.Text))
		}
	}
	if strings.Join(pieces, " ") != liveReply {
		k.t.Fatalf("the watcher got the pieces %q of %q", pieces, liveReply)
	}
	if len(pieces) < 2 {
		k.t.Fatalf("the reply went out as %q: a reply cut short needs several pieces", pieces)
	}
	return pieces
}

// liveRecords are the records of the live session's history.
func (k *liveKoe) liveRecords() []protocol.HistoryRecord {
	k.t.Helper()
	var page protocol.HistoryPage
	k.call(http.MethodGet, "/api/histories/"+k.conf+"/live/messages", &page)
	return page.Messages
}

// checkStoredAsHeard checks that the live history holds the viewer's turn
// and, of the reply, its first piece (all that had started playing when
// it was stopped), marked interrupted.
func (k *liveKoe) checkStoredAsHeard(turn string, pieces []string) {
	k.t.Helper()
	recs := k.liveRecords()
	if len(recs) != 2 || recs[0].Role != "human" || recs[0].Content != turn || recs[1].Role != "ai" {
		k.t.Errorf("the live history holds %+v", recs)
		return
	}
	if ai := recs[1]; !ai.Interrupted || strings.TrimSpace(ai.Content) != pieces[0] {
		k.t.Errorf("the stopped reply is stored as %q (interrupted: %v); heard was %q of %q",
			ai.Content, ai.Interrupted, pieces[0], liveReply)
	}
}

// frameNames are the frames' types, with a control's text.
func frameNames(fs []frame) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		if f.Type == "control" {
			out = append(out, "control "+f.Text)
			continue
		}
		out = append(out, f.Type)
	}
	return out
}

// TestLiveSkipWhileHeard: the streamer skips a live reply whose pieces
// have all gone out and are still being heard. The overlay is told to
// stop at once (control: interrupt, nothing else of the turn), the history
// keeps what had been heard, marked interrupted, and the live chat counts
// a skip, no failure.
func TestLiveSkipWhileHeard(t *testing.T) {
	testkit.External(t, "ngircd")
	k := startLiveKoe(t, nil)
	speakSlowly(t, k.llm)
	alice := ircdtest.NewChatter(t, k.irc.Plain, "alice", "koe")
	alice.Send("PRIVMSG #koe :hello koe")
	pieces := k.allPiecesSent()

	var skip struct {
		Skipped bool `json:"skipped"`
	}
	k.call(http.MethodPost, "/api/live/skip", &skip)
	if !skip.Skipped {
		t.Fatal("skip: no turn was skipped")
	}
	c := k.waitTurnOver("the skipped turn ended", 1)
	if c.Skipped != 1 || c.Failed != 0 || c.Spoken != 0 || c.LastError != "" {
		t.Fatalf("after the skip /api/live counts %+v", c)
	}
	k.checkStoredAsHeard(chatTurn("alice", "hello koe"), pieces)

	// The next viewer's turn starts: what the overlay got between the two
	// is what the skip told it.
	alice.Send("PRIVMSG #koe :quick question")
	between := frameNames(k.watchUntil("control", "conversation-chain-start"))
	if want := []string{"control interrupt", "control conversation-chain-start"}; !slices.Equal(between, want) {
		t.Fatalf("after the skip the overlay got %q, want %q", between, want)
	}
}

// TestLiveYieldsToStreamer: the streamer talks (a WebSocket client of the
// character) over a live reply still being heard. The overlay is told to
// stop the live reply before it gets the streamer's; the live chat counts
// the live turn as yielded, not failed, with no error; the history keeps
// what had been heard of it.
func TestLiveYieldsToStreamer(t *testing.T) {
	testkit.External(t, "ngircd")
	k := startLiveKoe(t, nil)
	speakSlowly(t, k.llm)
	streamer, resp, err := websocket.DefaultDialer.Dial("ws://"+k.addr+"/client-ws", nil)
	if err != nil {
		t.Fatalf("the streamer's client: %v", err)
	}
	_ = resp.Body.Close()
	t.Cleanup(func() { _ = streamer.Close() })

	alice := ircdtest.NewChatter(t, k.irc.Plain, "alice", "koe")
	alice.Send("PRIVMSG #koe :hello koe")
	pieces := k.allPiecesSent()

	// (startLiveKoe's fake LLM answers what is not a viewer's turn with
	// summaryReply.)
	if err := streamer.WriteJSON(map[string]string{"type": "text-input", "text": "Let me answer that myself."}); err != nil {
		t.Fatal(err)
	}
	got := k.watchUntil("audio", "")
	if f := got[len(got)-1]; f.DisplayText == nil || strings.TrimSpace(f.DisplayText.Text) != summaryReply {
		t.Fatalf("the overlay's next audio is %+v, want the streamer's reply %q", f.DisplayText, summaryReply)
	}
	names := frameNames(got)
	interrupt := slices.Index(names, "control interrupt")
	start := slices.Index(names, "control conversation-chain-start")
	switch {
	case interrupt < 0 || start < 0 || interrupt > start:
		t.Errorf("after the streamer spoke the overlay got %q: the live reply's interrupt must come before the streamer's reply", names)
	case interrupt != 0:
		t.Errorf("after the streamer spoke the overlay got %q: the live reply went on after all its pieces were sent", names)
	}

	c := k.waitTurnOver("the live turn ended", 1)
	if c.Yielded != 1 || c.Failed != 0 || c.Skipped != 0 || c.Spoken != 0 || c.LastError != "" {
		t.Fatalf("after the streamer's turn took over /api/live counts %+v", c)
	}
	k.checkStoredAsHeard(chatTurn("alice", "hello koe"), pieces)
}

// koeFrame is a frame as a koe.v1 watcher reads it.
type koeFrame struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
}

// readKoeUntil reads ws's frames up to one of type typ (and text, if not
// "") and returns them.
func readKoeUntil(t testing.TB, ws *websocket.Conn, typ, text string) []koeFrame {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(guard))
	var got []koeFrame
	for {
		var f koeFrame
		if err := ws.ReadJSON(&f); err != nil {
			t.Fatalf("koe watcher waiting for %s %s: %v (after %d frames)", typ, text, err, len(got))
		}
		got = append(got, f)
		if f.Type == typ && (text == "" || f.Text == text) {
			return got
		}
	}
}

// TestLiveTurnKoeEvents: a watcher of the live character that asked for
// koe's events (subprotocol koe.v1) gets a live turn's tokens, the
// status of its LLM call and its messages (the viewers' turn first, the
// answer as stored last), as a koe client gets its own turn's; an OLV
// watcher gets none of them.
func TestLiveTurnKoeEvents(t *testing.T) {
	testkit.External(t, "ngircd")
	k := startLiveKoe(t, nil)
	dialer := websocket.Dialer{Subprotocols: []string{protocol.Subprotocol}}
	kw, resp, err := dialer.Dial("ws://"+k.addr+"/client-ws?watch_conf="+k.conf, nil)
	if err != nil {
		t.Fatalf("koe watcher: %v", err)
	}
	_ = resp.Body.Close()
	t.Cleanup(func() { _ = kw.Close() })
	if kw.Subprotocol() != protocol.Subprotocol {
		t.Fatalf("the koe watcher got subprotocol %q", kw.Subprotocol())
	}
	// The greeting comes once the watcher is registered: from then on it
	// gets every frame of the character.
	readKoeUntil(t, kw, "set-model-and-conf", "")

	alice := ircdtest.NewChatter(t, k.irc.Plain, "alice", "koe")
	alice.Send("PRIVMSG #koe :hello koe")
	frames := readKoeUntil(t, kw, "control", "conversation-chain-end")

	var (
		tokens   strings.Builder
		steps    []string
		messages []protocol.ChatMessage
		kinds    []string // of token, status and message frames, in order
	)
	for _, f := range frames {
		switch f.Type {
		case protocol.TypeToken:
			var s string
			if err := json.Unmarshal(f.Content, &s); err != nil {
				t.Fatalf("token %s: %v", f.Content, err)
			}
			tokens.WriteString(s)
		case protocol.TypeStatus:
			var b protocol.StatusBody
			if err := json.Unmarshal(f.Content, &b); err != nil {
				t.Fatalf("status %s: %v", f.Content, err)
			}
			steps = append(steps, b.TaskID+" "+b.State)
		case protocol.TypeMessage:
			var m protocol.ChatMessage
			if err := json.Unmarshal(f.Content, &m); err != nil {
				t.Fatalf("message %s: %v", f.Content, err)
			}
			messages = append(messages, m)
		default:
			continue
		}
		kinds = append(kinds, f.Type)
	}
	if tokens.String() != liveReply {
		t.Errorf("the koe watcher's tokens read %q, want %q", tokens.String(), liveReply)
	}
	if want := []string{"llm:1 start", "llm:1 end"}; !slices.Equal(steps, want) {
		t.Errorf("the koe watcher's status steps are %q, want %q", steps, want)
	}
	// koe's events are in the order things happened: the viewers' turn,
	// the LLM call's start, its tokens, its end, the answer.
	var order []string
	for _, k := range kinds {
		if n := len(order); n == 0 || order[n-1] != k {
			order = append(order, k)
		}
	}
	if want := []string{protocol.TypeMessage, protocol.TypeStatus, protocol.TypeToken, protocol.TypeStatus, protocol.TypeMessage}; !slices.Equal(order, want) {
		t.Errorf("the koe watcher got the events %q, want them in the order %q", kinds, want)
	}
	if len(messages) != 2 {
		t.Fatalf("the koe watcher got the messages %+v", messages)
	}
	human, ai := messages[0], messages[1]
	if human.Type != protocol.MessageHuman || human.Content != chatTurn("alice", "hello koe") ||
		human.AdditionalKwargs.HistoryUID != "live" || human.AdditionalKwargs.ConfUID != k.conf {
		t.Errorf("the viewers' turn came as %+v", human)
	}
	if ai.Type != protocol.MessageAI || ai.Content != liveReply || ai.AdditionalKwargs.Interrupted ||
		ai.RunID == "" || ai.RunID != human.RunID || ai.AdditionalKwargs.HistoryUID != "live" {
		t.Errorf("the answer came as %+v (the turn's run_id %q)", ai, human.RunID)
	}

	// The OLV watcher, which did not ask for koe's events, got the same
	// turn without them.
	for _, f := range k.watchUntil("control", "conversation-chain-end") {
		if f.Type == protocol.TypeToken || f.Type == protocol.TypeStatus || f.Type == protocol.TypeMessage {
			t.Fatalf("the OLV watcher got a %s frame", f.Type)
		}
	}
}
