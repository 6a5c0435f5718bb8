package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	koeclient "koe/client"
	"koe/config"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/tools"
)

// One turn, one stream of events (issue 27): whichever way a turn starts
// (a WebSocket client, the chat API), every audience sees the same turn
// in its own wire format: the chat API's event stream, the speaking
// client's frames, OLV and koe.v1 watchers. These tests drive koe as
// users do, over real sockets, and compare what the audiences got.

// tsFlush returns every frame c got before the answer to a heartbeat sent
// now. Whatever koe queued for c before the heartbeat comes first: an
// event that everything done so far has reached c, not a time.
func tsFlush(c *client) []msg {
	c.t.Helper()
	c.send(msg{"type": "heartbeat"})
	got := c.until(isType("heartbeat-ack"))
	return got[:len(got)-1]
}

// tsCanon is v as JSON with sorted keys, so that the same content read
// from two transports compares equal.
func tsCanon(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(generic)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// tsKoeEvents are koe's own events among a koe.v1 connection's frames, as
// "type content" in the shape the chat API's events have.
func tsKoeEvents(t *testing.T, frames []msg) []string {
	t.Helper()
	var out []string
	for _, f := range frames {
		switch f.typ() {
		case protocol.EventToken, protocol.EventStatus, protocol.EventMessage:
			out = append(out, f.typ()+" "+tsCanon(t, f["content"]))
		case protocol.EventCitations:
			body := map[string]any{"history_uid": f["history_uid"], "run_id": f["run_id"], "citations": f["citations"]}
			out = append(out, f.typ()+" "+tsCanon(t, body))
		}
	}
	return out
}

// tsStreamEvents are a chat API stream's events but error and end, as
// "type content".
func tsStreamEvents(t *testing.T, evs []chatEvent) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Type == protocol.EventEnd || ev.Type == protocol.EventError {
			continue
		}
		var content any
		if err := json.Unmarshal(ev.Content, &content); err != nil {
			t.Fatalf("%s event: %v", ev.Type, err)
		}
		out = append(out, ev.Type+" "+tsCanon(t, content))
	}
	return out
}

// tsToolStates are the states tool_call_status frames gave tool id, in
// order.
func tsToolStates(frames []msg, id string) []string {
	var out []string
	for _, f := range frames {
		if tsIsTool(id)(f) {
			out = append(out, f.str("status"))
		}
	}
	return out
}

// tsSeen reads c's frames up to the first that satisfies stop; if none
// comes (the harness's wait for one frame), it says so and returns what
// came, and the test goes on to show what else is missing.
func tsSeen(c *client, what string, stop func(msg) bool) []msg {
	c.t.Helper()
	var got []msg
	for {
		m, err := c.read(10 * time.Second)
		if err != nil {
			c.t.Errorf("no %s (%v); got %q", what, err, types(got))
			return got
		}
		got = append(got, m)
		if stop(m) {
			return got
		}
	}
}

// tsIsTool matches the tool_call_status frames of tool call id.
func tsIsTool(id string) func(msg) bool {
	return func(f msg) bool { return f.typ() == "tool_call_status" && f.str("tool_id") == id }
}

// TestChatTurnReachesWatchers: a chat API turn is shown to the watchers
// of its character. An OLV watcher (an overlay) gets the chain's start,
// the reply as text-only audio frames (the chat API's session has no
// speech) and the chain's end; a koe.v1 watcher also gets koe's events,
// the very ones the chat API's stream carried, in the same order.
func TestChatTurnReachesWatchers(t *testing.T) {
	const reply = "Hello there, chat. It is a fine evening for a stream."
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}))
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	m := startKoe(t, cfg)
	q := "watch_conf=" + url.QueryEscape(cfg.Character.ConfUID)
	olv := dialWatcher(t, m.Addr(), q, false)
	koeWatcher := dialWatcher(t, m.Addr(), q, true)
	olv.greeted()
	koeWatcher.greeted()

	evs := openStream(t, m.Addr(), protocol.ChatRequest{Message: "Say hello to the chat."}).all()
	if want := []string{"message human", "status llm:1 start", "token", "status llm:1 end", "message ai", "end"}; !slices.Equal(describe(evs), want) {
		t.Fatalf("the chat API's events %q, want %q", describe(evs), want)
	}
	// The stream ends after the turn, which handed each event to the
	// watchers as it sent it to the stream.
	shown := tsFlush(olv)
	got := tsFlush(koeWatcher)

	if len(shown) < 3 || !isControl("conversation-chain-start")(shown[0]) || !isControl("conversation-chain-end")(shown[len(shown)-1]) {
		t.Fatalf("the OLV watcher saw %q: want the chain's start first and its end last", types(shown))
	}
	var pieces []string
	for _, f := range shown {
		switch f.typ() {
		case "audio":
			if f["audio"] != nil {
				t.Errorf("an audio frame of a chat API turn carries audio: %.80v", f)
			}
			d, _ := f["display_text"].(map[string]any)
			text, _ := d["text"].(string)
			pieces = append(pieces, text)
		case "token", "status", "message", "citations":
			t.Errorf("the OLV watcher got koe's %s event", f.typ())
		}
	}
	if strings.Join(pieces, "") != reply {
		t.Errorf("the OLV watcher was shown %q, want the reply %q", pieces, reply)
	}

	want := tsStreamEvents(t, evs)
	if koe := tsKoeEvents(t, got); !slices.Equal(koe, want) {
		t.Errorf("the koe.v1 watcher's events:\n%s\nthe chat API stream's:\n%s", strings.Join(koe, "\n"), strings.Join(want, "\n"))
	}
	if koeOLV, olv := watched(got, false), watched(shown, false); !slices.Equal(koeOLV, olv) {
		t.Errorf("the koe.v1 watcher's OLV frames %q differ from the OLV watcher's %q", koeOLV, olv)
	}
}

// TestChatStreamCitesLikeTheWebSocket: an answer that cites a document of
// the character's knowledge base is followed, on the chat API's stream, by
// a citations event right after its message, with the citations a koe.v1
// WebSocket client gets in its citations frame for the same turn; koe's
// Go client decodes it.
func TestChatStreamCitesLikeTheWebSocket(t *testing.T) {
	e := ragStart(t, answer("Only moderators may post links [1]. Anything else?"), nil)
	e.add("rules.html")
	const question = "Can I post a link to my stream?"

	wsCites, after := citationsIn(dialKoe(t, e.koe.Addr()).turn(question))
	if len(wsCites) != 1 || !after {
		t.Fatalf("the WebSocket's citations frame: %v (after the final message: %v)", wsCites, after)
	}

	evs := openStream(t, e.koe.Addr(), protocol.ChatRequest{Message: question}).all()
	d := describe(evs)
	if n := len(d); n < 3 || d[n-3] != "message ai" || d[n-2] != protocol.EventCitations || d[n-1] != protocol.EventEnd {
		t.Fatalf("the chat API's events %q: want the answer, its citations, end", d)
	}
	var body struct {
		HistoryUID string `json:"history_uid"`
		RunID      string `json:"run_id"`
		Citations  []any  `json:"citations"`
	}
	if err := json.Unmarshal(evs[len(evs)-2].Content, &body); err != nil {
		t.Fatalf("the citations event: %v", err)
	}
	ai := messagesOf(evs, "ai")
	final := ai[len(ai)-1]
	if body.HistoryUID == "" || body.HistoryUID != final.AdditionalKwargs.HistoryUID || body.RunID == "" || body.RunID != final.RunID {
		t.Errorf("the citations event names history %q run %q; the answer is in %q run %q", body.HistoryUID, body.RunID, final.AdditionalKwargs.HistoryUID, final.RunID)
	}
	if got, want := tsCanon(t, body.Citations), tsCanon(t, wsCites); got != want {
		t.Errorf("the chat API cites %s\nthe WebSocket %s", got, want)
	}

	kc, err := koeclient.New("http://" + e.koe.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.HangGuard)
	defer cancel()
	var kinds []string
	var cited *protocol.CitationsBody
	for ev, err := range kc.Stream(ctx, protocol.ChatRequest{Message: question}) {
		if err != nil {
			t.Fatalf("the Go client's stream: %v", err)
		}
		kinds = append(kinds, ev.Type)
		if ev.Type == protocol.EventCitations {
			cited = ev.Citations
		}
	}
	if n := len(kinds); n < 3 || kinds[n-3] != protocol.EventMessage || kinds[n-2] != protocol.EventCitations {
		t.Errorf("the Go client's events end %q: want a message, citations, end", kinds)
	}
	if cited == nil || cited.HistoryUID == "" || cited.RunID == "" {
		t.Fatalf("the Go client decoded the citations as %+v", cited)
	}
	if got, want := tsCanon(t, cited.Citations), tsCanon(t, wsCites); got != want {
		t.Errorf("the Go client decoded %s\nthe WebSocket got %s", got, want)
	}
}

// tsHeldServer answers nothing: each request waits until its client gives
// up on it, as a weather service that hangs would. arrived tells of each
// request as it comes in.
type tsHeldServer struct {
	url     string
	arrived chan string
}

func tsStartHeldServer(t *testing.T) *tsHeldServer {
	t.Helper()
	h := &tsHeldServer{arrived: make(chan string, 16)}
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case h.arrived <- r.URL.Query().Get("name"):
		default:
		}
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	}))
	// Cleanups run last first: the held requests are let go, then the
	// server closes (Close waits for its handlers).
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) })
	h.url = srv.URL
	return h
}

// wait returns the place the next request asked about.
func (h *tsHeldServer) wait(t *testing.T) string {
	t.Helper()
	select {
	case name := <-h.arrived:
		return name
	case <-time.After(testkit.HangGuard):
		t.Fatal("the tool's request never reached the weather service")
	}
	return ""
}

// TestStoppedToolClosesEverywhere: a turn stopped while its tool runs
// (the weather service does not answer) closes the tool for every
// audience. The chat API stream, stopped by POST /api/chat/HISTORY/stop,
// has the tool's status error and a tool message with status error before
// its end; an OLV client that interrupts, and an OLV watcher of both
// turns, get tool_call_status error for the call: it is not left running.
func TestStoppedToolClosesEverywhere(t *testing.T) {
	weather := tsStartHeldServer(t)
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		if !r.Stream {
			return fakellm.Reply{Tokens: []string{"They talked."}}
		}
		if slices.ContainsFunc(r.Messages, func(m fakellm.Message) bool { return m.Role == "tool" }) {
			return fakellm.Reply{Tokens: fakellm.Words("It is mild.")}
		}
		id, place := "call_ws", "Paris"
		if strings.Contains(r.UserWords(), "Berlin") {
			id, place = "call_chat", "Berlin"
		}
		return fakellm.Reply{Tokens: fakellm.Words("Let me look."), ToolCalls: []fakellm.ToolCall{
			{ID: id, Name: "get_weather", Arguments: fmt.Sprintf(`{"location":%q}`, place)},
		}}
	})
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Character.Tools = tools.Config{Enabled: []string{"get_weather"}, Weather: tools.WeatherSettings{BaseURL: weather.url, GeocodingURL: weather.url}}
	m := startKoe(t, cfg)
	watcher := dialWatcher(t, m.Addr(), "watch_conf="+url.QueryEscape(cfg.Character.ConfUID), false)
	watcher.greeted()

	// The chat API, stopped from another request.
	s := openStream(t, m.Addr(), protocol.ChatRequest{Message: "What is the weather in Berlin?"})
	uid := s.next().message().AdditionalKwargs.HistoryUID
	s.until(func(ev chatEvent) bool {
		return ev.Type == protocol.EventStatus && ev.status().TaskID == "tool:call_chat" && ev.status().State == protocol.StatusStart
	})
	if place := weather.wait(t); place != "Berlin" {
		t.Fatalf("the weather service was asked about %q", place)
	}
	// A stop drops what its watchers were not written yet: the watcher
	// has seen the tool run before it is stopped.
	seen := tsSeen(watcher, "call_chat running on the watcher", tsIsTool("call_chat"))
	resp := postJSON(t, "http://"+m.Addr()+"/api/chat/"+uid+"/stop", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stop: %d", resp.StatusCode)
	}
	rest := s.all()
	if !slices.ContainsFunc(rest, func(ev chatEvent) bool {
		return ev.Type == protocol.EventStatus && ev.status().TaskID == "tool:call_chat" && ev.status().State == protocol.StatusError
	}) {
		t.Errorf("the stopped chat API stream has no error status for tool:call_chat: %q", describe(rest))
	}
	var result *protocol.ChatMessage
	for _, tm := range messagesOf(rest, protocol.MessageTool) {
		if tm.ToolCallID == "call_chat" {
			result = &tm
		}
	}
	if result == nil || result.Status != protocol.ToolFailed {
		t.Errorf("the stopped chat API stream's tool message: %+v (events %q)", result, describe(rest))
	}
	// The stream has ended: the watcher was offered all of the turn.
	if got := tsToolStates(append(seen, tsFlush(watcher)...), "call_chat"); !slices.Equal(got, []string{protocol.ToolRunning, protocol.ToolError}) {
		t.Errorf("the watcher saw the chat API's tool as %q, want running then error", got)
	}

	// An OLV client that interrupts its turn.
	c := dialGreeted(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "And the weather in Paris?", "images": []any{}})
	before := c.until(tsIsTool("call_ws"))
	if place := weather.wait(t); place != "Paris" {
		t.Fatalf("the weather service was asked about %q", place)
	}
	seen = tsSeen(watcher, "call_ws running on the watcher", tsIsTool("call_ws"))
	c.send(msg{"type": "interrupt-signal", "text": "Let me look."})
	// koe stops the turn, and waits for it, before it answers the next
	// message.
	frames := append(before, tsFlush(c)...)
	if got := tsToolStates(frames, "call_ws"); !slices.Equal(got, []string{protocol.ToolRunning, protocol.ToolError}) {
		t.Errorf("the interrupting client saw its tool as %q, want running then error", got)
	}
	// The watcher is handed each frame once the client's copy is written:
	// all of them, by the time the client read its heartbeat's answer.
	if got := tsToolStates(append(seen, tsFlush(watcher)...), "call_ws"); !slices.Equal(got, []string{protocol.ToolRunning, protocol.ToolError}) {
		t.Errorf("the watcher saw the WebSocket's tool as %q, want running then error", got)
	}
}

// tsJoinedMidway checks what a watcher that joined mid-reply saw (w)
// against the speaker's turn as a watcher from the start would have seen
// it (s): the chain's start, then the audio pieces from some piece on,
// each once, in order, then the rest of the turn as the speaker got it,
// up to the chain's end. Which piece comes first depends on when the
// watcher joined; that it is one of the reply's, and that none is left
// out after it, does not.
func tsJoinedMidway(s, w []string) error {
	if len(w) < 3 || w[0] != "control:conversation-chain-start" || w[len(w)-1] != "control:conversation-chain-end" {
		return errors.New("want the chain's start, audio, the chain's end")
	}
	isAudio := func(f string) bool { return strings.HasPrefix(f, "audio:") }
	var audio []string
	for _, f := range s {
		if isAudio(f) {
			audio = append(audio, f)
		}
	}
	got := w[1:]
	if !slices.ContainsFunc(got, isAudio) || !slices.Contains(got, audio[len(audio)-1]) {
		return errors.New("no audio, or not the reply's last piece")
	}
	// got is the state it joined with (pieces s sent before the join)
	// followed by what s sent after the join: find the join.
	for join := len(s); join >= 0; join-- {
		after := s[join:]
		if len(after) > len(got) || !slices.Equal(got[len(got)-len(after):], after) {
			continue
		}
		state := got[:len(got)-len(after)]
		sent := slices.DeleteFunc(slices.Clone(s[:join]), func(f string) bool { return !isAudio(f) })
		if len(state) <= len(sent) && slices.Equal(sent[len(sent)-len(state):], state) {
			return nil
		}
	}
	return errors.New("it is not the pieces from one on, then the rest of the turn")
}

// tsBrief is frames as describeFrame gives them, the audio frames without
// their volumes, for messages.
func tsBrief(frames []string) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		if text, ok := strings.CutPrefix(f, "audio:"); ok {
			text, _, _ = strings.Cut(text, ":")
			f = "audio:" + text
		}
		out[i] = f
	}
	return out
}

// tsHeldReply is a fake LLM whose reply says pieces, the first two at
// once and the rest after join is called: watchers join between the
// pieces, whatever the machine. (The second piece is complete once the
// third's first word is out.)
func tsHeldReply(t *testing.T, pieces []string) (llm *fakellm.Server, join func()) {
	t.Helper()
	tokens := fakellm.Words(strings.Join(pieces, " "))
	third := strings.Fields(pieces[2])[0]
	hold := slices.IndexFunc(tokens, func(tok string) bool { return strings.Contains(tok, third) }) + 1
	joined := make(chan struct{})
	var once sync.Once
	join = func() { once.Do(func() { close(joined) }) }
	llm = startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens, BeforeChunk: func(i int) {
		if i == hold {
			<-joined
		}
	}}))
	t.Cleanup(join) // before the fake server closes: it waits for its handlers
	return llm, join
}

// tsFinishWithLateWatcher lets the speaker's held turn go to its end, with
// one more watcher (query, at addr) joining once every piece has gone out:
// whatever audio that one gets, it gets from the state it joins with. It
// returns frames with the speaker's further frames, and that watcher.
func tsFinishWithLateWatcher(t *testing.T, speaker *client, addr, query string, frames []msg) ([]msg, *client) {
	t.Helper()
	frames = append(frames, speaker.until(isType("backend-synth-complete"))...)
	late := dialWatcher(t, addr, query, false)
	late.greeted()
	speaker.send(msg{"type": "frontend-playback-complete"})
	return append(frames, speaker.until(isControl("conversation-chain-end"))...), late
}

// tsHeldOpen keeps a held reply's turn open: it ends when the speaker says
// it played the reply, not when a timer runs out, and the held stream
// does not count as a model that went quiet.
func tsHeldOpen(cfg config.Config) config.Config {
	cfg.Conversation.PlaybackTimeout = testkit.HangGuard
	cfg.Character.LLM.IdleTimeout = testkit.HangGuard
	return cfg
}

// TestWatcherJoinsMidReply: a watcher that connects while a reply is
// being spoken (an overlay reloaded mid-reply) starts with the chain's
// start and the piece being played, not idle until the next turn, and
// follows the turn to its end; one that connects when nothing is on air
// gets no chain.
func TestWatcherJoinsMidReply(t *testing.T) {
	// Six pieces of fake speech, two to three seconds each.
	pieces := []string{"First comes the overture of our evening.", "Second, the weather along the coast.",
		"Third, a song about the old lighthouse.", "Fourth, the letters our listeners sent.",
		"Fifth, the quiz with a prize for the winner.", "And last, a good night to all of you."}
	llm, join := tsHeldReply(t, pieces)
	cfg := tsHeldOpen(withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm))
	m := startKoe(t, cfg)

	speaker := dialURL(t, websocket.DefaultDialer, "ws://"+m.Addr()+"/client-ws?client_uid=ts-midway", nil)
	speaker.until(isControl("start-mic"))
	speaker.send(msg{"type": "text-input", "text": "What is on tonight?", "images": []any{}})
	heard := 0
	frames := speaker.until(func(f msg) bool {
		if f.typ() == "audio" {
			heard++
		}
		return heard == 2
	})
	confQuery := "watch_conf=" + url.QueryEscape(cfg.Character.ConfUID)
	midway := map[string]*client{
		"by character": dialWatcher(t, m.Addr(), confQuery, false),
		"by client":    dialWatcher(t, m.Addr(), "watch=ts-midway", false),
	}
	for _, w := range midway {
		w.greeted()
	}
	join()
	frames, last := tsFinishWithLateWatcher(t, speaker, m.Addr(), confQuery, frames)

	all := watched(frames, false)
	var audio []string
	for _, f := range all {
		if strings.HasPrefix(f, "audio:") {
			audio = append(audio, f)
		}
	}
	if len(audio) != len(pieces) {
		t.Fatalf("the reply went out as %d pieces, want %d: %q", len(audio), len(pieces), tsBrief(all))
	}
	check := func(name string, w *client, from []string) {
		t.Helper()
		got := describeFrames(w.until(isControl("conversation-chain-end")))
		if err := tsJoinedMidway(all, got); err != nil {
			t.Errorf("the watcher %s saw %q: %v\nthe speaker's turn: %q", name, tsBrief(got), err, tsBrief(all))
			return
		}
		// The piece it starts with is one of those that had gone out when
		// it joined; which one depends on how long it took.
		if !slices.Contains(from, got[1]) {
			t.Errorf("the watcher %s starts with %q, not a piece on air when it joined", name, tsBrief(got[1:2]))
		}
		t.Logf("the watcher %s started from %q", name, tsBrief(got[1:2]))
		if rest := tsFlush(w); len(rest) > 0 {
			t.Errorf("the watcher %s got %q after the chain's end", name, types(rest))
		}
	}
	for name, w := range midway {
		check(name, w, audio[:2])
	}
	check("after the last piece", last, audio)

	late := dialWatcher(t, m.Addr(), confQuery, false)
	late.greeted()
	if got := tsFlush(late); len(got) > 0 {
		t.Errorf("a watcher joining with nothing on air got %q", types(got))
	}
}

// koe's events of a turn come in the order things happened, however far
// the speech lags behind: here speech waits until the whole answer has
// been written, and still the first call's end, its tool call, the tool's
// steps and result, and the second call's start come between the tokens
// of the two calls, as on the chat API's stream (which has no speech).
func TestKoeEventsInTheOrderTheyHappen(t *testing.T) {
	const first, second = "Let me check.", "Six times seven is 42."
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words(first), ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`},
		}},
		fakellm.Reply{Tokens: fakellm.Words(second)},
	))
	speech := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(speech) }) }
	t.Cleanup(release)
	llm.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply { <-speech; return fakellm.SpeechReply{} })
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Character.Tools.Enabled = []string{"calculator"}
	m := startKoe(t, cfg)
	c := dialKoe(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "What is six times seven?", "images": []any{}})
	var frames []msg
	frames = append(frames, c.until(func(f msg) bool {
		st, _ := f["content"].(map[string]any)
		return f.typ() == "status" && st["task_id"] == "llm:2" && st["state"] == "end"
	})...)
	release()
	frames = append(frames, c.until(isType("backend-synth-complete"))...)
	c.send(msg{"type": "frontend-playback-complete"})
	frames = append(frames, c.until(isControl("conversation-chain-end"))...)

	var steps []string
	for _, f := range frames {
		var step string
		switch f.typ() {
		case "token":
			step = "token"
		case "status":
			st, _ := f["content"].(map[string]any)
			step = fmt.Sprintf("status %v %v", st["task_id"], st["state"])
		case "message":
			m, _ := f["content"].(map[string]any)
			step = fmt.Sprintf("message %v", m["type"])
			if calls, _ := m["tool_calls"].([]any); len(calls) > 0 {
				step += " calls"
			}
		default:
			continue
		}
		if n := len(steps); n > 0 && step == "token" && steps[n-1] == "token" {
			continue
		}
		steps = append(steps, step)
	}
	want := []string{"message human", "status llm:1 start", "token", "status llm:1 end", "message ai calls",
		"status tool:call_1 start", "status tool:call_1 end", "message tool",
		"status llm:2 start", "token", "status llm:2 end", "message ai"}
	if !slices.Equal(steps, want) {
		t.Fatalf("koe's events came as\n%q\nwant\n%q", steps, want)
	}
}
