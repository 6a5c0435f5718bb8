package realtime_test

import (
	"encoding/base64"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"koe/asr"
	"koe/config"
	"koe/internal/g711"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/proctest"
	"koe/tts"
)

// The audio input of /v1/realtime against a real koe: speech made by
// espeak-ng, sent as a client sends it, heard by koe's voice detection
// and by pocketsphinx (koe's default speech recognition); the character
// speaks through the fake server's speech endpoint.

// rtaSentence is what the tests say. Of the sentences tried, pocketsphinx
// (its default wide-band model) heard this one best from espeak-ng once
// resampled to 24 kHz and on to 16 kHz: "i would go to a beach tomorrow".
const rtaSentence = "i would like to go to the beach tomorrow"

var rtaKeyWords = []string{"would", "like", "go", "beach", "tomorrow"}

// rtaHeard counts the key words a transcript holds.
func rtaHeard(transcript string) int {
	n := 0
	words := strings.Fields(strings.ToLower(transcript))
	for _, k := range rtaKeyWords {
		for _, w := range words {
			if w == k {
				n++
				break
			}
		}
	}
	return n
}

// rtaAudioKoe starts a koe that hears with pocketsphinx and speaks through
// the fake server; cfgs adjust its configuration.
func rtaAudioKoe(t *testing.T, respond func(fakellm.Request) fakellm.Reply, cfgs ...func(*config.Config)) (string, *fakellm.Server) {
	t.Helper()
	testkit.External(t, "espeak-ng and pocketsphinx")
	proctest.LookPath(t, "pocketsphinx_continuous", "pocketsphinx")
	llm := koetest.StartLLM(t, respond)
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	for _, f := range cfgs {
		f(&cfg)
	}
	m := koetest.StartKoe(t, cfg)
	return m.Addr(), llm
}

// rtaSpeech is text spoken by espeak-ng at rate Hz, with lead of silence
// before it and tail after (in milliseconds), 16-bit samples.
func rtaSpeech(t testing.TB, text string, rate, lead, tail int) []int16 {
	t.Helper()
	espeak := proctest.LookPath(t, "espeak-ng", "espeak-ng")
	path := filepath.Join(t.TempDir(), "speech.wav")
	if out, err := exec.Command(espeak, "-v", "en-us", "-s", "150", "-w", path, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := tts.Normalize(data)
	if err != nil {
		t.Fatal(err)
	}
	r, err := asr.NewResampler(a.SampleRate, rate)
	if err != nil {
		t.Fatal(err)
	}
	speech := append(r.Process(a.Samples), r.Flush()...)
	out := make([]int16, rate*lead/1000, rate*(lead+tail)/1000+len(speech))
	out = append(out, speech...)
	return append(out, make([]int16, rate*tail/1000)...)
}

// rtaPCM16 is samples as pcm16 bytes.
func rtaPCM16(samples []int16) []byte {
	b := make([]byte, 0, 2*len(samples))
	for _, s := range samples {
		b = binary.LittleEndian.AppendUint16(b, uint16(s))
	}
	return b
}

// rtaULaw is samples as G.711 µ-law bytes.
func rtaULaw(samples []int16) []byte { return g711.AppendULaw(nil, samples) }

// appendAudio sends b in input_audio_buffer.append events of chunk bytes.
func (c *rtClient) appendAudio(b []byte, chunk int) {
	c.t.Helper()
	for len(b) > 0 {
		n := min(chunk, len(b))
		c.send(map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(b[:n])})
		b = b[n:]
	}
}

// rtaULawTo16k is what koe hears of µ-law bytes: decoded, resampled to
// 16 kHz as one stream.
func rtaULawTo16k(t testing.TB, ulaw []byte) []int16 {
	t.Helper()
	r, err := asr.NewResampler(8000, asr.SampleRate)
	if err != nil {
		t.Fatal(err)
	}
	s := g711.AppendULawSamples(nil, ulaw)
	return append(r.Process(s), r.Flush()...)
}

// rtaTranscribe is what koe's default speech recognition hears in 16 kHz
// samples.
func rtaTranscribe(t testing.TB, samples []int16) string {
	t.Helper()
	e, err := asr.New(asr.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	text, err := e.Transcribe(t.Context(), asr.EncodeWAV(samples, asr.SampleRate))
	if err != nil {
		t.Fatal(err)
	}
	return text
}
