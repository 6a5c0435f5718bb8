package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/app"
	"koe/config"
	"koe/livechat"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/ircdtest"
)

// Golden traces of one turn per origin (a WebSocket text turn, a
// recording, proactive speech, a chat API request, the live chat), as each
// of its consumers received it: the speaking client as OLV and as koe.v1
// (two runs of the same turn), the chat API's event stream, an OLV watcher
// and a koe.v1 watcher of the character. One golden per origin and
// consumer under testdata/streams/; go test ./server -run StreamTrace
// -update rewrites them (the live chat's needs ngircd, its one kind of
// source: it skips in the short lane). Beyond the goldens, the consumers
// must agree: the reply each one can assemble (from its audio pieces,
// from its tokens) is the same text, and every consumer of koe's
// `message` events got the same messages.

// streamReply is what the character says in every traced turn: two
// pieces to speak.
const streamReply = "Good evening! It is lovely to hear from you."

// streamGates hold a turn at two known points so that every consumer gets
// its frames in the same order on every run. koe's events (statuses,
// tokens, messages) go out as things happen, while audio goes out as it
// is spoken; how the two interleave is a matter of timing, not of the
// protocol. So the LLM's first chunk waits until the turn's first status
// has reached the koe watcher, and speech waits until the LLM call's end
// has: the traces show the call's events, then the pieces and what
// follows them.
type streamGates struct {
	first, speech         chan struct{}
	firstOnce, speechOnce sync.Once
}

// newStreamGates is made after the fake LLM, so that its cleanup lets a
// held stream go before the LLM's waits for its handlers.
func newStreamGates(t *testing.T) *streamGates {
	g := &streamGates{first: make(chan struct{}), speech: make(chan struct{})}
	t.Cleanup(func() { g.openFirst(); g.openSpeech() })
	return g
}

func (g *streamGates) openFirst()  { g.firstOnce.Do(func() { close(g.first) }) }
func (g *streamGates) openSpeech() { g.speechOnce.Do(func() { close(g.speech) }) }

// follow plays the turn's gates from what the koe watcher gets.
func (g *streamGates) follow(koeWatcher *client) {
	koeWatcher.t.Helper()
	awaitFrame(koeWatcher, "the koe watcher's status llm:1 start", func(f msg) bool {
		st, _ := f["content"].(map[string]any)
		return f.typ() == "status" && st["task_id"] == "llm:1" && st["state"] == "start"
	})
	g.openFirst()
	var said strings.Builder
	awaitFrame(koeWatcher, "the koe watcher's status llm:1 end", func(f msg) bool {
		if f.typ() == "token" {
			said.WriteString(f.str("content"))
		}
		st, _ := f["content"].(map[string]any)
		return f.typ() == "status" && st["task_id"] == "llm:1" && st["state"] == "end" || isControl("conversation-chain-end")(f)
	})
	if said.String() != streamReply {
		koeWatcher.t.Fatalf("the koe watcher's tokens say %q, want %q", said.String(), streamReply)
	}
	g.openSpeech()
}

// awaitFrame reads c's frames up to the first that satisfies stop; what
// names it in the failure when it never comes.
func awaitFrame(c *client, what string, stop func(msg) bool) {
	c.t.Helper()
	for {
		f, err := c.read(testkit.HangGuard)
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if stop(f) {
			return
		}
	}
}

// streamKoe is a koe whose every turn says streamReply, held by gates,
// speaking and hearing through the fake LLM's audio endpoints.
type streamKoe struct {
	llm   *fakellm.Server
	gates *streamGates
	m     *app.Main
	conf  string
}

func startStreamKoe(t *testing.T, tune func(*config.Config)) *streamKoe {
	t.Helper()
	k := &streamKoe{}
	k.llm = startLLM(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words(streamReply), BeforeChunk: func(i int) {
			if i == 0 {
				<-k.gates.first
			}
		}}
	})
	k.gates = newStreamGates(t)
	k.llm.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
		<-k.gates.speech
		return fakellm.SpeechReply{} // the deterministic synthetic speech
	})
	cfg := withFakeASR(withFakeSpeech(testConfig(t, t.TempDir(), k.llm.URL()), k.llm), k.llm)
	if tune != nil {
		tune(&cfg)
	}
	k.m = startKoe(t, cfg)
	k.conf = cfg.Character.ConfUID
	return k
}

// watch connects the character's two watchers, greeted, and starts
// their traces.
func (k *streamKoe) watch(t *testing.T) (olv, koeEvents *client) {
	t.Helper()
	q := "watch_conf=" + url.QueryEscape(k.conf)
	olv, koeEvents = dialWatcher(t, k.m.Addr(), q, false), dialWatcher(t, k.m.Addr(), q, true)
	for _, w := range []*client{olv, koeEvents} {
		w.greeted()
		w.tr = true
	}
	return olv, koeEvents
}

// endTurn reads a WebSocket consumer's frames to the turn's end, playing
// the part of a client that plays the audio when it speaks, and checks
// that nothing of the turn follows (out of the trace).
func endTurn(c *client, what string, speaking bool) {
	c.t.Helper()
	awaitFrame(c, "the end of the turn (conversation-chain-end) on the "+what, func(f msg) bool {
		switch {
		case f.typ() == "error":
			c.t.Fatalf("error frame: %v", f)
		case speaking && f.typ() == "backend-synth-complete":
			c.send(msg{"type": "frontend-playback-complete"})
		}
		return isControl("conversation-chain-end")(f)
	})
	c.tr = false
	c.silent()
}

// endWatching reads the watchers' frames to the turn's end.
func endWatching(olv, koeEvents *client) {
	olv.t.Helper()
	endTurn(olv, "OLV watcher", false)
	endTurn(koeEvents, "koe watcher", false)
}

// streamTrace is what one consumer received of a turn.
type streamTrace struct {
	consumer string
	lines    []string
	// koeEvents: the consumer asked for koe's events (a koe.v1 client or
	// watcher, the chat API's stream).
	koeEvents bool
	// audio: it is sent the reply's pieces (every consumer but the chat
	// API's stream).
	audio bool
}

// spokenOrigins are the turns a WebSocket client starts.
var spokenOrigins = []struct {
	name  string
	start func(k *streamKoe, c *client)
}{
	{"ws_text", func(_ *streamKoe, c *client) {
		c.send(msg{"type": "text-input", "text": "Good evening, Koe.", "images": []any{}})
	}},
	{"ws_voice", func(k *streamKoe, c *client) {
		k.llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
			return fakellm.TranscriptionReply{Text: "good evening koe"}
		})
		for _, part := range [][]float64{silenceF(300 * time.Millisecond), tone(600*time.Millisecond, 0.5), silenceF(time.Second)} {
			c.send(msg{"type": "raw-audio-data", "audio": part})
		}
	}},
	{"proactive", func(_ *streamKoe, c *client) {
		c.send(msg{"type": "ai-speak-signal", "idle_time": 30})
	}},
}

// TestStreamTraceWebSocket: a turn a WebSocket client starts by text, by
// voice and by proactive speech, run twice: with the speaker as a stock
// OLV client, then as a koe.v1 client. The watchers see the same turn both
// times.
func TestStreamTraceWebSocket(t *testing.T) {
	for _, origin := range spokenOrigins {
		t.Run(origin.name, func(t *testing.T) {
			var traces []streamTrace
			var watchers [2][]streamTrace
			for run, koeSpeaker := range []bool{false, true} {
				k := startStreamKoe(t, nil)
				olvW, koeW := k.watch(t)
				var speaker *client
				name := "olv_speaker"
				if koeSpeaker {
					speaker, name = dialKoe(t, k.m.Addr()), "koe_speaker"
				} else {
					speaker = dial(t, k.m.Addr(), nil)
					speaker.until(isControl("start-mic"))
				}
				speaker.tr = true
				origin.start(k, speaker)
				k.gates.follow(koeW)
				endTurn(speaker, name, true)
				endWatching(olvW, koeW)
				traces = append(traces, streamTrace{consumer: name, lines: speaker.trace, koeEvents: koeSpeaker, audio: true})
				watchers[run] = []streamTrace{
					{consumer: "olv_watcher", lines: olvW.trace, audio: true},
					{consumer: "koe_watcher", lines: koeW.trace, koeEvents: true, audio: true},
				}
			}
			// What a watcher sees does not depend on what its speaker
			// asked for.
			for i, w := range watchers[0] {
				sameStream(t, w.consumer+" of the OLV speaker and of the koe.v1 speaker", w.lines, watchers[1][i].lines)
			}
			checkStreams(t, origin.name, append(traces, watchers[0]...))
		})
	}
}

// TestStreamTraceChatAPI: a chat API turn, as its event stream and the
// character's watchers received it.
func TestStreamTraceChatAPI(t *testing.T) {
	k := startStreamKoe(t, nil)
	olvW, koeW := k.watch(t)
	s := openStream(t, k.m.Addr(), protocol.ChatRequest{Message: "Good evening over the API."})
	k.gates.follow(koeW)
	s.all()
	endWatching(olvW, koeW)
	checkStreams(t, "chat_api", []streamTrace{
		{consumer: "sse", lines: sseEvents(s.raw), koeEvents: true},
		{consumer: "olv_watcher", lines: olvW.trace, audio: true},
		{consumer: "koe_watcher", lines: koeW.trace, koeEvents: true, audio: true},
	})
}

// TestStreamTraceLive: a live chat turn, started by a viewer's message in
// a real IRC channel (the live chat's one kind of source), as the
// character's watchers received it; the live session has no client of
// its own.
func TestStreamTraceLive(t *testing.T) {
	irc := ircdtest.Start(t, "")
	k := startStreamKoe(t, func(cfg *config.Config) {
		cfg.LiveChat.Enabled = true
		cfg.LiveChat.Twitch.Channel = "koe"
		cfg.LiveChat.Twitch.Server = fmt.Sprintf("127.0.0.1:%d", irc.TLS)
		cfg.LiveChat.Twitch.CAFile = irc.CertFile
	})
	testkit.Await(t, "the live chat's source connected", func() (livechat.Status, bool) {
		var st livechat.Status
		apiCall(t, "GET", "http://"+k.m.Addr()+"/api/live", &st)
		return st, len(st.Sources) == 1 && st.Sources[0].Connected
	})
	olvW, koeW := k.watch(t)
	ircdtest.NewChatter(t, irc.Plain, "alice", "koe").Send("PRIVMSG #koe :good evening koe")
	k.gates.follow(koeW)
	endWatching(olvW, koeW)
	checkStreams(t, "live", []streamTrace{
		{consumer: "olv_watcher", lines: olvW.trace, audio: true},
		{consumer: "koe_watcher", lines: koeW.trace, koeEvents: true, audio: true},
	})
}

// sseEvents are a chat API stream's events, one line each: without the
// blank lines between them and the keep-alive comments that may come
// between them when the machine is slow.
func sseEvents(raw []string) []string {
	var out []string
	for _, l := range raw {
		if strings.HasPrefix(l, "data: ") {
			out = append(out, l)
		}
	}
	return out
}

// sameStream fails when two consumers' traces differ once normalised.
func sameStream(t *testing.T, what string, a, b []string) {
	t.Helper()
	na, nb := normalise(a), normalise(b)
	if slices.Equal(na, nb) {
		return
	}
	i := 0
	for i < len(na) && i < len(nb) && na[i] == nb[i] {
		i++
	}
	line := func(l []string) string {
		if i < len(l) {
			return l[i]
		}
		return "(the end)"
	}
	t.Fatalf("%s differ at line %d:\n%s\n%s", what, i+1, line(na), line(nb))
}

// checkStreams compares each consumer's trace with its golden, then
// checks that the consumers agree on the turn.
func checkStreams(t *testing.T, origin string, traces []streamTrace) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Join("testdata", "streams"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var messages []string
	var from string
	for _, tr := range traces {
		golden(t, "streams/"+origin+"."+tr.consumer+".jsonl", normalise(tr.lines))
		seen := readStream(t, tr.lines)
		if !tr.koeEvents && len(seen.koeOnly) > 0 {
			t.Errorf("%s: the OLV consumer got koe's events %q", tr.consumer, seen.koeOnly)
		}
		if tr.audio && seen.pieces != streamReply {
			t.Errorf("%s: the pieces say %q, want %q", tr.consumer, seen.pieces, streamReply)
		}
		if !tr.koeEvents {
			continue
		}
		if seen.tokens != streamReply {
			t.Errorf("%s: the tokens say %q, want %q", tr.consumer, seen.tokens, streamReply)
		}
		if len(seen.answers) != 1 || seen.answers[0] != streamReply {
			t.Errorf("%s: the final messages are %q, want one: %q", tr.consumer, seen.answers, streamReply)
		}
		got := strings.Join(normalise(seen.messages), "\n")
		if from == "" {
			messages, from = seen.messages, tr.consumer
		} else if want := strings.Join(normalise(messages), "\n"); got != want {
			t.Errorf("the messages %s got:\n%s\ndiffer from those %s got:\n%s", tr.consumer, got, from, want)
		}
	}
	if from == "" {
		t.Fatal("no consumer of koe's events in the traces")
	}
}

// streamSeen is what a consumer can assemble of a turn from its frames.
type streamSeen struct {
	pieces, tokens string
	// messages are the message events as received (the line's JSON),
	// answers the contents of the AI's final messages.
	messages, answers []string
	koeOnly           []string
}

// readStream reads a trace: the lines koe sent ("< " on a WebSocket,
// "data: " on the chat API's stream).
func readStream(t *testing.T, lines []string) streamSeen {
	t.Helper()
	var seen streamSeen
	var pieces, tokens strings.Builder
	for _, l := range lines {
		dir, body, _ := strings.Cut(l, " ")
		if dir != "<" && dir != "data:" {
			continue
		}
		var f struct {
			Type        string          `json:"type"`
			Content     json.RawMessage `json:"content"`
			DisplayText struct {
				Text string `json:"text"`
			} `json:"display_text"`
		}
		if err := json.Unmarshal([]byte(body), &f); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		switch f.Type {
		case "audio":
			pieces.WriteString(f.DisplayText.Text)
		case "token":
			var s string
			_ = json.Unmarshal(f.Content, &s)
			tokens.WriteString(s)
		case "message":
			var m protocol.ChatMessage
			_ = json.Unmarshal(f.Content, &m)
			seen.messages = append(seen.messages, "< "+body)
			if m.Type == protocol.MessageAI && len(m.ToolCalls) == 0 {
				seen.answers = append(seen.answers, m.Content)
			}
		}
		if slices.Contains([]string{"token", "status", "message", "citations", "memory-state"}, f.Type) {
			seen.koeOnly = append(seen.koeOnly, f.Type)
		}
	}
	seen.pieces, seen.tokens = pieces.String(), tokens.String()
	return seen
}
