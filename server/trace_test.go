package server_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koe/testkit/fakellm"
)

// Golden traces of whole conversations beside spoken_turn.jsonl: each
// scenario is made deterministic by holding the fake LLM at a known
// point, never by timing. go test ./server -run Trace -update rewrites
// them after an intended protocol change.

// holdLLM makes streams wait before chunk index at until the test ends: a
// reply stopped in the middle. Create it after the fake LLM, so that it
// lets go before the LLM's cleanup waits for its handlers.
type holdLLM struct {
	release chan struct{}
	once    sync.Once
}

func newHold(t *testing.T) *holdLLM {
	h := &holdLLM{release: make(chan struct{})}
	t.Cleanup(func() { h.once.Do(func() { close(h.release) }) })
	return h
}

func (h *holdLLM) reply(text string, at int) fakellm.Reply {
	return fakellm.Reply{Tokens: fakellm.Words(text), BeforeChunk: func(i int) {
		if i == at {
			<-h.release
		}
	}}
}

// withoutTokens drops koe's token frames from a trace: they stream from
// the turn while audio and memory frames come from other goroutines, so
// their interleaving varies; tests check them on their own.
func withoutTokens(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, `"type":"token"`) {
			out = append(out, l)
		}
	}
	return out
}

func TestInterruptTrace(t *testing.T) {
	var hold *holdLLM
	// The stream holds after " It": the first sentence is complete.
	llm := startLLM(t, func(fakellm.Request) fakellm.Reply {
		return hold.reply("Once upon a time there was a fox. It lived in a quiet wood.", 9)
	})
	hold = newHold(t)
	m := startKoe(t, withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm))
	c := dial(t, m.Addr(), nil)
	c.tr = true
	c.until(isControl("start-mic"))
	c.send(msg{"type": "create-new-history"})
	c.until(isType("new-history-created"))
	c.send(msg{"type": "text-input", "text": "Tell me a story", "images": []any{}})
	c.until(isType("audio"))
	c.send(msg{"type": "interrupt-signal", "text": "Once upon a time"})
	// Nothing of the stopped turn follows, not even chain-end.
	c.request(msg{"type": "heartbeat"}, "heartbeat-ack")
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"]
	c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
	golden(t, "interrupt.jsonl", normalise(c.trace))
}

func TestBargeInTrace(t *testing.T) {
	var hold *holdLLM
	var replies atomic.Int32
	llm := startLLM(t, func(fakellm.Request) fakellm.Reply {
		if replies.Add(1) == 1 {
			return hold.reply("Once upon a time there was a fox. It lived in a quiet wood.", 9)
		}
		return fakellm.Reply{Tokens: fakellm.Words("Sorry, go on.")}
	})
	hold = newHold(t)
	var heard atomic.Int32
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		if heard.Add(1) == 1 {
			return fakellm.TranscriptionReply{Text: "tell me a story"}
		}
		return fakellm.TranscriptionReply{Text: "wait a moment"}
	})
	m := startKoe(t, withFakeASR(withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm), llm))
	c := dial(t, m.Addr(), nil)
	c.tr = true
	c.until(isControl("start-mic"))
	utterance := [][]float64{silenceF(300 * time.Millisecond), tone(600*time.Millisecond, 0.5), silenceF(time.Second)}
	for _, part := range utterance {
		c.send(msg{"type": "raw-audio-data", "audio": part})
	}
	c.until(isType("audio")) // the reply is being spoken
	for _, part := range utterance {
		c.send(msg{"type": "raw-audio-data", "audio": part})
	}
	c.until(isType("backend-synth-complete")) // the answer to the second utterance
	c.send(msg{"type": "frontend-playback-complete"})
	c.until(isControl("conversation-chain-end"))
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"]
	c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
	golden(t, "barge_in.jsonl", normalise(c.trace))
}

func TestHistorySwitchTrace(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dial(t, m.Addr(), nil)
	c.tr = true
	c.until(isControl("start-mic"))
	first := c.request(msg{"type": "create-new-history"}, "new-history-created").str("history_uid")
	c.turn("my name is Ada")
	second := c.request(msg{"type": "create-new-history"}, "new-history-created").str("history_uid")
	c.turn("the sky is green")
	c.request(msg{"type": "fetch-history-list"}, "history-list")
	c.request(msg{"type": "fetch-and-set-history", "history_uid": first}, "history-data")
	c.turn("what is my name?")
	c.request(msg{"type": "delete-history", "history_uid": second}, "history-deleted")
	c.request(msg{"type": "fetch-history-list"}, "history-list")
	golden(t, "history_switch.jsonl", normalise(c.trace))

	// The switched-to history's turn reached the LLM with that history's
	// conversation only. (Long-term memory may still bring the other
	// history's words in its memories block, which says what it is: the
	// echo model's "You said:" links them.)
	reqs := chatRequests(llm)
	last := reqs[len(reqs)-1]
	var turns []string
	for _, m := range last.Messages {
		if !strings.HasPrefix(m.Content, "Memories from earlier conversations") {
			turns = append(turns, m.Role+": "+m.Content)
		}
	}
	conversation := strings.Join(turns, "\n")
	if !strings.Contains(conversation, "user: my name is Ada") || strings.Contains(conversation, "the sky is green") {
		t.Fatalf("after the switch the LLM got:\n%s", contentOf(last))
	}
}

func TestSummaryTurnTrace(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		if !r.Stream { // a summary
			<-release
			return fakellm.Reply{Tokens: []string{"Human greeted Koe three times and Koe answered each time."}}
		}
		return fakellm.Echo(0)(r)
	})
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialKoe(t, m.Addr())
	c.tr = true
	for _, text := range []string{"hello one", "hello two", "hello three"} {
		c.turn(text)
	}
	open()
	c.waitSummaries(1) // the summary arrives on its own
	c.turn("what did we talk about?")
	golden(t, "summary_turn.jsonl", normalise(withoutTokens(c.trace)))

	reqs := chatRequests(llm)
	sys := reqs[len(reqs)-1].Messages[0].Content
	if !strings.Contains(sys, "[Turns 1-3] Human greeted Koe three times") {
		t.Fatalf("the last request's system message lacks the summary:\n%s", sys)
	}
}

// TestToolTurnTrace: an OLV client's turn in which the model calls the
// calculator. The tool's frames come in the reply's order: after what the
// model said before calling, before the answer.
func TestToolTurnTrace(t *testing.T) {
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("Let me check."), ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: `{"expression":"6 * 7"}`},
		}},
		fakellm.Reply{Tokens: fakellm.Words("Six times seven is 42.")},
	))
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Character.Tools.Enabled = []string{"calculator"}
	m := startKoe(t, cfg)
	c := dial(t, m.Addr(), nil)
	c.tr = true
	c.until(isControl("start-mic"))
	c.send(msg{"type": "create-new-history"})
	c.until(isType("new-history-created"))
	c.send(msg{"type": "text-input", "text": "What is six times seven?", "images": []any{}})
	c.until(isType("backend-synth-complete"))
	c.send(msg{"type": "frontend-playback-complete"})
	c.until(isControl("conversation-chain-end"))
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"]
	c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")
	golden(t, "tool_turn.jsonl", normalise(c.trace))
}
