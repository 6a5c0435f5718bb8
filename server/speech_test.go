package server_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/testkit"
	"koe/testkit/fakellm"
)

// audioPieces returns the audio messages of a turn's frames.
func audioPieces(frames []msg) []msg {
	var out []msg
	for _, f := range frames {
		if f.typ() == "audio" {
			out = append(out, f)
		}
	}
	return out
}

func displayOf(m msg) string {
	dt, _ := m["display_text"].(map[string]any)
	s, _ := dt["text"].(string)
	return s
}

// Syntheses finish in random order; audio still goes out in sentence order,
// every piece spoken, and backend-synth-complete only after the last one.
func TestSpeechOrderUnderRandomDelays(t *testing.T) {
	var sentences []string
	for i := 1; i <= 12; i++ {
		sentences = append(sentences, "This is sentence number "+strconv.Itoa(i)+".")
	}
	reply := strings.Join(sentences, " ")
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}))
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	llm.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
		mu.Lock()
		defer mu.Unlock()
		return fakellm.SpeechReply{Delay: time.Duration(rng.IntN(80)) * time.Millisecond}
	})
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Conversation.SpeechConcurrency = 4
	cfg.Conversation.FasterFirstResponse = false
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())

	frames := c.turn("count for me")
	pieces := audioPieces(frames)
	if len(pieces) != len(sentences) {
		t.Fatalf("%d audio pieces, want %d: %v", len(pieces), len(sentences), types(frames))
	}
	for i, p := range pieces {
		if got := strings.TrimSpace(displayOf(p)); got != sentences[i] {
			t.Fatalf("piece %d is %q, want %q", i, got, sentences[i])
		}
		if p["audio"] == nil {
			t.Fatalf("piece %d has no audio", i)
		}
		vols := p["volumes"].([]any)
		want := int((fakellm.SpeechDuration(strings.TrimSpace(displayOf(p)), 1) + 19*time.Millisecond) / (20 * time.Millisecond))
		if len(vols) != want {
			t.Errorf("piece %d: %d volumes, want %d (one per 20 ms)", i, len(vols), want)
		}
	}
	lastAudio, synthDone := -1, -1
	for i, f := range frames {
		switch f.typ() {
		case "audio":
			lastAudio = i
		case "backend-synth-complete":
			synthDone = i
		}
	}
	if synthDone < lastAudio {
		t.Fatalf("backend-synth-complete (frame %d) before the last audio (frame %d)", synthDone, lastAudio)
	}
}

// A synthesis that fails, or hangs past the TTS timeout, becomes a silent
// piece in its place; the turn goes on and the other pieces are spoken.
func TestSpeechFailuresBecomeSilentPieces(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("First one. Broken two. Stuck three. Fine four.")}))
	llm.SetSpeech(func(r fakellm.SpeechRequest) fakellm.SpeechReply {
		switch {
		case strings.Contains(r.Input, "Broken"):
			return fakellm.SpeechReply{Status: 500, ErrorMessage: "vocoder exploded"}
		case strings.Contains(r.Input, "Stuck"):
			return fakellm.SpeechReply{Hang: true}
		}
		return fakellm.SpeechReply{}
	})
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Character.TTS.Timeout = 300 * time.Millisecond
	cfg.Conversation.FasterFirstResponse = false
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())

	pieces := audioPieces(c.turn("go"))
	want := []struct {
		text   string
		spoken bool
	}{{"First one.", true}, {"Broken two.", false}, {"Stuck three.", false}, {"Fine four.", true}}
	if len(pieces) != len(want) {
		t.Fatalf("%d pieces, want %d", len(pieces), len(want))
	}
	for i, w := range want {
		if strings.TrimSpace(displayOf(pieces[i])) != w.text || (pieces[i]["audio"] != nil) != w.spoken {
			t.Fatalf("piece %d = %q spoken=%v, want %q spoken=%v", i, displayOf(pieces[i]), pieces[i]["audio"] != nil, w.text, w.spoken)
		}
	}
	c.turn("still fine?")
}

// What is shown and what is spoken differ: emotions become expressions,
// think blocks are shown as asides and not spoken, URLs are not read out.
func TestSpeechTextHandling(t *testing.T) {
	reply := "<think>The user wants news.</think>[joy] Great news! Read it at https://example.com/news today."
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}))
	m := startKoe(t, withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm))
	c := dialGreeted(t, m.Addr())
	pieces := audioPieces(c.turn("any news?"))

	var shown strings.Builder
	var sawJoy bool
	for _, p := range pieces {
		shown.WriteString(displayOf(p))
		if a, ok := p["actions"].(map[string]any); ok {
			exprs, _ := a["expressions"].([]any)
			if len(exprs) == 1 && exprs[0] == float64(3) { // mao_pro's joy
				sawJoy = true
			}
		}
		if strings.Contains(displayOf(p), "user wants") && p["audio"] != nil {
			t.Errorf("think piece was spoken: %v", p)
		}
	}
	if want := "(The user wants news.)[joy] Great news! Read it at https://example.com/news today."; shown.String() != want {
		t.Errorf("shown %q, want %q", shown.String(), want)
	}
	if !sawJoy {
		t.Errorf("no joy expression in %v", pieces)
	}
	var spoken []string
	for _, r := range llm.SpeechRequests() {
		spoken = append(spoken, r.Input)
	}
	all := strings.Join(spoken, "|")
	for _, bad := range []string{"[joy]", "think", "user wants", "https", "example.com"} {
		if strings.Contains(all, bad) {
			t.Errorf("speech input %q contains %q", all, bad)
		}
	}
	if !strings.Contains(all, "Great news!") {
		t.Errorf("speech input %q lacks the sentence", all)
	}
}

// espeakChildren lists espeak-ng processes started by this test binary.
func espeakChildren(t *testing.T) []int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	me := strconv.Itoa(os.Getpid())
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		open, closeParen := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closeParen < open {
			continue
		}
		fields := strings.Fields(s[closeParen+1:])
		if s[open+1:closeParen] == "espeak-ng" && len(fields) > 1 && fields[1] == me {
			pids = append(pids, pid)
		}
	}
	return pids
}

func requireEspeak(t *testing.T) {
	t.Helper()
	testkit.External(t, "espeak-ng")
	if _, err := os.Stat("/usr/bin/espeak-ng"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("espeak-ng is not installed; scripts/test.sh installs it")
		}
		t.Skip("espeak-ng is not installed")
	}
}

// An interrupt while espeak-ng is speaking kills it: no process is left and
// no audio of the turn arrives afterwards.
func TestInterruptDuringSynthesis(t *testing.T) {
	requireEspeak(t)
	long := strings.TrimSpace(strings.Repeat("and then the story went on and on ", 250)) + ". "
	tokens := append(fakellm.Words(long), fakellm.Words(strings.Repeat("More words follow here. ", 50))...)
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: tokens}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Conversation.FasterFirstResponse = false
	cfg.Character.TTS.Espeak.Rate = 80
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "tell me a long story", "images": []any{}})

	testkit.Eventually(t, "espeak-ng started", func() bool { return len(espeakChildren(t)) > 0 })
	c.send(msg{"type": "interrupt-signal", "text": ""})
	c.send(msg{"type": "heartbeat"})
	c.until(isType("heartbeat-ack"))
	c.silent()
	testkit.Await(t, "no espeak-ng process is left after the interrupt", func() ([]int, bool) {
		pids := espeakChildren(t)
		return pids, len(pids) == 0
	})
}

// Real espeak-ng end to end: every sentence arrives as a WAV with volumes.
func TestEspeakSpokenTurn(t *testing.T) {
	requireEspeak(t)
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Hello there, my friend. How are you today?")}))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	c := dialGreeted(t, m.Addr())
	pieces := audioPieces(c.turn("hi"))
	if len(pieces) != 3 { // the first piece is cut at its comma
		t.Fatalf("%d pieces: %v", len(pieces), pieces)
	}
	for _, p := range pieces {
		if p["audio"] == nil || len(p["volumes"].([]any)) == 0 {
			t.Fatalf("piece %q not spoken", displayOf(p))
		}
	}
}

// With tts.engine none, replies come as text-only pieces and no error.
func TestSpeechOff(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Quiet now. Still quiet.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	pieces := audioPieces(c.turn("hello")) // turn fails the test on any error frame
	if len(pieces) != 2 || pieces[0]["audio"] != nil || pieces[1]["audio"] != nil {
		t.Fatalf("pieces = %v", pieces)
	}
	if n := len(llm.SpeechRequests()); n != 0 {
		t.Fatalf("%d speech requests with speech off", n)
	}
}
