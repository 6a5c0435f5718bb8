package server_test

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/asr"
	"koe/config"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/tts"
)

// withFakeASR makes koe transcribe through the OpenAI-compatible engine
// against the fake server.
func withFakeASR(cfg config.Config, llm *fakellm.Server) config.Config {
	cfg.ASR.Engine = "openai"
	cfg.ASR.OpenAI.BaseURL = llm.URL()
	return cfg
}

// tone is a 16 kHz float signal of d.
func tone(d time.Duration, amp float64) []float64 {
	n := int(d.Seconds() * 16000)
	out := make([]float64, n)
	for i := range out {
		out[i] = amp * math.Sin(2*math.Pi*220*float64(i)/16000)
	}
	return out
}

// sendMic sends samples as the OLV client does: mic-audio-data chunks of
// 4096, then mic-audio-end.
func (c *client) sendMic(samples []float64) {
	c.t.Helper()
	for len(samples) > 0 {
		n := min(4096, len(samples))
		c.send(msg{"type": "mic-audio-data", "audio": samples[:n]})
		samples = samples[n:]
	}
	c.send(msg{"type": "mic-audio-end", "images": []any{}})
}

func TestMicAudioTurn(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := withFakeASR(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())

	c.sendMic(tone(time.Second, 0.3))
	frames := c.until(isType("user-input-transcription"))
	if got := frames[len(frames)-1].str("text"); got != "hello from the fake transcriber" {
		t.Fatalf("transcription = %q", got)
	}
	c.until(isType("backend-synth-complete"))
	c.send(msg{"type": "frontend-playback-complete"})
	c.until(isControl("conversation-chain-end"))
	reqs := chatRequests(llm)
	if last := reqs[len(reqs)-1].Messages; !strings.HasSuffix(last[len(last)-1].Content, "\n\nhello from the fake transcriber") {
		t.Fatalf("LLM got %+v", last[len(last)-1])
	}
	tr := llm.TranscriptionRequests()
	if len(tr) != 1 || tr[0].AudioBytes != 44+2*16000 {
		t.Fatalf("transcription requests = %+v, want one WAV of one second", tr)
	}

	// Nothing recognised: no turn, and the chain ends so the client listens again.
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		return fakellm.TranscriptionReply{Text: "  "}
	})
	c.sendMic(tone(500*time.Millisecond, 0.3))
	frames = c.until(isControl("conversation-chain-end"))
	if got := types(frames); !strings.Contains(strings.Join(got, ","), "user-input-transcription") {
		t.Fatalf("frames = %v", got)
	}
	if n := len(chatRequests(llm)); n != len(reqs) {
		t.Fatalf("an empty transcript started an LLM call")
	}
}

func TestBadAudio(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := withFakeASR(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Conversation.MaxUtterance = 2 * time.Second
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())

	c.expectError([]byte(`{"type":"mic-audio-data","audio":[0.1,"x",0.2]}`), "invalid message")
	c.expectError(msg{"type": "mic-audio-data", "audio": []float64{0.1, 1.5}}, "bad audio")
	c.expectError(msg{"type": "mic-audio-end"}, "without any mic-audio-data")
	// Ten minutes, against a two-second limit: refused and dropped.
	long := tone(time.Second, 0.1)
	var failed bool
	for i := 0; i < 600 && !failed; i++ {
		c.send(msg{"type": "mic-audio-data", "audio": long})
		if i >= 2 {
			m := c.next()
			failed = m.typ() == "error" && strings.Contains(m.str("message"), "longer than")
		}
	}
	if !failed {
		t.Fatal("an overlong recording was not refused")
	}
	c.expectError(msg{"type": "mic-audio-end"}, "without any mic-audio-data") // the buffer was dropped
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if m := c.next(); m.typ() != "error" || !strings.Contains(m.str("message"), "binary audio") {
		t.Fatalf("odd binary frame: %v", m)
	}
	c.expectError(msg{"type": "raw-audio-config", "sample_rate": 5}, "sample_rate")
	c.alive()
	if n := len(llm.TranscriptionRequests()); n != 0 {
		t.Fatalf("%d transcriptions of refused audio", n)
	}
}

// espeakSpeech speaks text with espeak-ng and returns 22050 Hz samples.
func espeakSpeech(t *testing.T, text string) tts.Audio {
	t.Helper()
	testkit.External(t, "espeak-ng and pocketsphinx")
	for _, tool := range []string{"espeak-ng", "pocketsphinx_continuous"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed; scripts/test.sh installs it", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	path := filepath.Join(t.TempDir(), "speech.wav")
	if out, err := exec.Command("espeak-ng", "-v", "en-us", "-s", "150", "-w", path, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v %s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := tts.Normalize(data)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// spoken is what espeak-ng says. pocketsphinx is weak on synthetic voices
// and changes its mind with silence around the speech; this sentence it
// hears the same either way ("i would like go go").
const spoken = "i would like to go home"

func keyWords(text string) int {
	n := 0
	for _, w := range strings.Fields(spoken) {
		if strings.Contains(" "+text+" ", " "+w+" ") {
			n++
		}
	}
	return n
}

// A real round trip with no service: espeak-ng speaks, koe hears it with
// pocketsphinx, once as OLV-style float batches and once as raw binary PCM
// through the server-side VAD at the recording's own rate.
func TestSpokenInputRoundTrip(t *testing.T) {
	speech := espeakSpeech(t, spoken)
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())

	// Float batches at 16 kHz, as the OLV web client sends them.
	res, err := asr.NewResampler(speech.SampleRate, 16000)
	if err != nil {
		t.Fatal(err)
	}
	pcm := append(res.Process(speech.Samples), res.Flush()...)
	floats := make([]float64, len(pcm))
	for i, v := range pcm {
		floats[i] = float64(v) / 32768
	}
	c.sendMic(floats)
	frames := c.until(isType("user-input-transcription"))
	heard := frames[len(frames)-1].str("text")
	if keyWords(heard) < 3 {
		t.Fatalf("pocketsphinx heard %q", heard)
	}
	c.until(isType("backend-synth-complete"))
	c.send(msg{"type": "frontend-playback-complete"})
	c.until(isControl("conversation-chain-end"))

	// Binary PCM at 22050 Hz with a second of silence around it: koe
	// resamples, finds the speech, and answers it.
	c.send(msg{"type": "raw-audio-config", "sample_rate": speech.SampleRate})
	silence := make([]int16, speech.SampleRate)
	stream := append(append(append([]int16{}, silence...), speech.Samples...), silence...)
	buf := make([]byte, 2*len(stream))
	for i, v := range stream {
		binary.LittleEndian.PutUint16(buf[2*i:], uint16(v))
	}
	for off := 0; off < len(buf); off += 4096 {
		if err := c.ws.WriteMessage(websocket.BinaryMessage, buf[off:min(off+4096, len(buf))]); err != nil {
			t.Fatal(err)
		}
	}
	frames = c.until(isType("user-input-transcription"))
	if !strings.Contains(strings.Join(types(frames), ","), "control:mic-audio-end") {
		t.Fatalf("no mic-audio-end from the VAD: %v", types(frames))
	}
	if heard := frames[len(frames)-1].str("text"); keyWords(heard) < 3 {
		t.Fatalf("pocketsphinx heard %q through the VAD path", heard)
	}
	c.until(isControl("conversation-chain-end"))
}

// Speech starting while the AI is speaking interrupts it (barge-in).
func TestBargeIn(t *testing.T) {
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("This is a long answer. ", 40)), Interval: 20 * time.Millisecond},
		fakellm.Reply{Tokens: fakellm.Words("Sorry, go on.")},
	))
	cfg := withFakeASR(withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm), llm)
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "tell me everything", "images": []any{}})
	c.until(isType("audio")) // the AI is speaking

	// The user talks over it: a second of loud, voiced sound in silence.
	quiet := make([]float64, 8000)
	voice := tone(time.Second, 0.5)
	for _, part := range [][]float64{quiet, voice, quiet, quiet} {
		c.send(msg{"type": "raw-audio-data", "audio": part})
	}
	frames := c.until(isControl("interrupt"))
	_ = frames
	select {
	case <-llm.Disconnects():
	case <-time.After(30 * time.Second):
		t.Fatal("barge-in did not stop the LLM stream")
	}
	frames = c.until(isType("user-input-transcription"))
	if !strings.Contains(strings.Join(types(frames), ","), "control:mic-audio-end") {
		t.Fatalf("no mic-audio-end after the utterance: %v", types(frames))
	}
}

// silenceF is d of 16 kHz digital silence as floats.
func silenceF(d time.Duration) []float64 { return make([]float64, int(d.Seconds()*16000)) }

// A pause mid-sentence: the second part starts while the first is still
// being transcribed. koe hears both as one utterance and answers once.
func TestPauseJoinsUtterances(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	var calls atomic.Int32
	transcribing := make(chan struct{})
	llm.SetTranscription(func(r fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		if calls.Add(1) == 1 {
			close(transcribing)
			return fakellm.TranscriptionReply{Hang: true} // still transcribing when speech resumes
		}
		return fakellm.TranscriptionReply{Text: "hello there how are you"}
	})
	cfg := withFakeASR(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())

	for _, part := range [][]float64{silenceF(300 * time.Millisecond), tone(600*time.Millisecond, 0.5), silenceF(time.Second)} {
		c.send(msg{"type": "raw-audio-data", "audio": part})
	}
	c.until(isControl("mic-audio-end"))
	// The first part is being transcribed when the user goes on.
	select {
	case <-transcribing:
	case <-time.After(30 * time.Second):
		t.Fatal("the first part was never sent to the recogniser")
	}
	for _, part := range [][]float64{tone(600*time.Millisecond, 0.5), silenceF(time.Second)} {
		c.send(msg{"type": "raw-audio-data", "audio": part})
	}
	frames := c.until(isType("user-input-transcription"))
	if got := frames[len(frames)-1].str("text"); got != "hello there how are you" {
		t.Fatalf("transcription = %q", got)
	}
	for _, f := range frames {
		if isControl("interrupt")(f) {
			t.Fatalf("a pause was taken for a barge-in: %v", types(frames))
		}
	}
	c.until(isType("backend-synth-complete"))
	c.send(msg{"type": "frontend-playback-complete"})
	c.until(isControl("conversation-chain-end"))
	tr := llm.TranscriptionRequests()
	if len(tr) != 2 || tr[1].AudioBytes <= tr[0].AudioBytes {
		t.Fatalf("transcriptions %d, sizes %v: the second must hold both parts", len(tr), tr)
	}
	if n := len(chatRequests(llm)); n != 1 {
		t.Fatalf("%d LLM calls, want one answer for the whole sentence", n)
	}
}

// After a barge-in, memory keeps what was probably heard: the pieces whose
// playback had started, not everything sent ahead.
func TestBargeInKeepsWhatWasHeard(t *testing.T) {
	var sentences []string
	for i := 0; i < 30; i++ {
		sentences = append(sentences, "Sentence number "+string(rune('a'+i%26))+" is here.")
	}
	full := strings.Join(sentences, " ")
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(full)}, fakellm.Reply{Tokens: fakellm.Words("Yes?")}))
	cfg := withFakeASR(withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm), llm)
	cfg.Conversation.FasterFirstResponse = false
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "read me everything", "images": []any{}})
	c.until(isType("backend-synth-complete")) // all of it sent; each piece plays ~1.2 s
	for _, part := range [][]float64{silenceF(200 * time.Millisecond), tone(500*time.Millisecond, 0.5), silenceF(time.Second)} {
		c.send(msg{"type": "raw-audio-data", "audio": part})
	}
	c.until(isControl("interrupt"))
	c.until(isControl("conversation-chain-end"))
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	records := c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")["messages"].([]any)
	stopped := records[1].(map[string]any)
	heard, _ := stopped["content"].(string)
	if stopped["interrupted"] != true || heard == "" || !strings.HasPrefix(full, heard) || len(heard) > len(full)/3 {
		t.Fatalf("stored %q (interrupted %v); want a short start of the reply", heard, stopped["interrupted"])
	}
}

// raw-audio-config ends the stream: half an utterance is not joined to
// what comes after (a mic turned off and on again).
func TestRawAudioConfigResetsTheStream(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := withFakeASR(testConfig(t, t.TempDir(), llm.URL()), llm)
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	c.send(msg{"type": "raw-audio-data", "audio": append(silenceF(300*time.Millisecond), tone(500*time.Millisecond, 0.5)...)})
	c.send(msg{"type": "raw-audio-config", "sample_rate": 16000})
	c.send(msg{"type": "raw-audio-data", "audio": silenceF(2 * time.Second)})
	c.alive()
	c.silent()
	if n := len(llm.TranscriptionRequests()); n != 0 {
		t.Fatalf("%d transcriptions of a stream that was reset mid-word", n)
	}
}
