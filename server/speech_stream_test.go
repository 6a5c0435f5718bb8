package server_test

import (
	"encoding/base64"
	"encoding/binary"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"koe/config"
	"koe/internal/wavio"
	"koe/testkit/fakellm"
)

// streamedSpeech makes cfg's character speak through llm's speech
// endpoint streaming at pace (times real time), with sentences sent in
// parts of 250 ms, then up to 1 s.
func streamedSpeech(cfg config.Config, llm *fakellm.Server, pace float64) config.Config {
	cfg = withFakeSpeech(cfg, llm)
	cfg.Character.TTS.StreamFirstMillis = 250
	cfg.Character.TTS.StreamPieceMillis = 1000
	cfg.Conversation.FasterFirstResponse = false
	llm.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
		return fakellm.SpeechReply{Stream: &fakellm.SpeechStream{Pace: pace}}
	})
	return cfg
}

// sentencePart is an audio frame of a streamed sentence, decoded.
type sentencePart struct {
	text    string
	hasText bool
	samples []int16
	volumes int
	actions any
}

func decodePart(t *testing.T, m msg) sentencePart {
	t.Helper()
	p := sentencePart{volumes: len(m["volumes"].([]any)), actions: m["actions"]}
	if dt, ok := m["display_text"].(map[string]any); ok {
		p.hasText, p.text = true, dt["text"].(string)
	}
	b64, _ := m["audio"].(string)
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("audio of %q is not base64: %v", p.text, err)
	}
	f, pcm, err := wavio.Parse(data)
	if err != nil || f != (wavio.Format{Tag: wavio.FormatPCM, Channels: 1, Rate: fakellm.SpeechSampleRate, Bits: 16}) {
		t.Fatalf("audio of %q is not a 24 kHz mono 16-bit WAV: %+v, %v", p.text, f, err)
	}
	if len(data) != wavio.HeaderSize+len(pcm) || binary.LittleEndian.Uint32(data[40:44]) != uint32(len(pcm)) {
		t.Fatalf("audio of %q is not a complete WAV with exact sizes", p.text)
	}
	for i := 0; i+1 < len(pcm); i += 2 {
		p.samples = append(p.samples, int16(binary.LittleEndian.Uint16(pcm[i:])))
	}
	return p
}

// A sentence streamed by the engine goes out in parts, each a complete
// WAV with its own volumes, the display text and actions on the first
// part only; together the parts are the whole sentence's speech, in order.
func TestStreamedSentencesInParts(t *testing.T) {
	for _, format := range []string{"wav", "pcm"} {
		t.Run(format, func(t *testing.T) {
			sentences := []string{"[joy] Hello there, this sentence is streamed in parts.", " And a second one follows it."}
			llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(strings.Join(sentences, ""))}))
			cfg := streamedSpeech(testConfig(t, t.TempDir(), llm.URL()), llm, 20)
			cfg.Character.TTS.OpenAI.Format = format
			m := startKoe(t, cfg)
			c := dialGreeted(t, m.Addr())

			var got [][]sentencePart
			for _, f := range audioPieces(c.turn("stream please")) {
				p := decodePart(t, f)
				if p.hasText {
					got = append(got, nil)
				} else if p.actions != nil {
					t.Fatalf("a later part carries actions %v", p.actions)
				}
				if len(got) == 0 {
					t.Fatal("the first audio frame has no display text")
				}
				got[len(got)-1] = append(got[len(got)-1], p)
			}
			reqs := llm.SpeechRequests()
			if len(got) != len(sentences) || len(reqs) != len(sentences) {
				t.Fatalf("%d sentences with display text, %d speech requests; want %d", len(got), len(reqs), len(sentences))
			}
			if got[0][0].actions == nil {
				t.Error("the first part of [joy]'s sentence has no actions")
			}
			slice := fakellm.SpeechSampleRate / 50
			for i, parts := range got {
				if parts[0].text != sentences[i] {
					t.Errorf("sentence %d shows %q, want %q", i, parts[0].text, sentences[i])
				}
				// The parts: 250 ms in whole 20 ms slices, then each as
				// long as those before it, up to 1 s; the last holds
				// what is left.
				first := (6000 + slice - 1) / slice * slice
				total, sent := 0, 0
				want := first
				for j, p := range parts {
					if j < len(parts)-1 && len(p.samples) != want {
						t.Errorf("sentence %d part %d: %d samples, want %d", i, j, len(p.samples), want)
					}
					if p.volumes != (len(p.samples)+slice-1)/slice {
						t.Errorf("sentence %d part %d: %d volumes for %d samples", i, j, p.volumes, len(p.samples))
					}
					total += len(p.samples)
					sent += len(p.samples)
					want = min(24000, max(first, sent))
				}
				if len(parts) < 3 {
					t.Errorf("sentence %d went out in %d parts", i, len(parts))
				}
				// Syntheses run concurrently: the request is the one for
				// this sentence's speech.
				wantTotal := -1
				for _, r := range reqs {
					if strings.Contains(parts[0].text, r.Input) {
						wantTotal = utf8.RuneCountInString(r.Input) * int(fakellm.SpeechRuneDuration.Seconds()*fakellm.SpeechSampleRate)
					}
				}
				if total != wantTotal {
					t.Errorf("sentence %d: %d samples in its parts, the server sent %d", i, total, wantTotal)
				}
			}
		})
	}
}

// An interrupt while a sentence is streaming stops it at once: the speech
// request is cancelled, nothing of the turn follows, and the history keeps
// what the client heard.
func TestStreamedSentenceInterrupt(t *testing.T) {
	long := strings.TrimSpace(strings.Repeat("and the story goes on ", 40)) + "."
	llm := startLLM(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words(long)},
		fakellm.Reply{Tokens: fakellm.Words("Sorry, go ahead.")},
	))
	// At real time the sentence (50 s of audio) is still streaming long
	// after its first parts went out.
	m := startKoe(t, streamedSpeech(testConfig(t, t.TempDir(), llm.URL()), llm, 1))
	c := dialGreeted(t, m.Addr())
	drainDisconnects(llm)

	c.send(msg{"type": "text-input", "text": "tell me a story", "images": []any{}})
	var parts []sentencePart
	c.until(func(m msg) bool {
		if m.typ() == "audio" {
			parts = append(parts, decodePart(t, m))
		}
		return len(parts) == 2
	})
	if !parts[0].hasText || parts[1].hasText {
		t.Fatalf("display text on parts: %v, %v", parts[0].hasText, parts[1].hasText)
	}
	heard := parts[0].text
	c.send(msg{"type": "interrupt-signal", "text": heard})
	select {
	case <-llm.Disconnects():
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupt did not cancel the speech stream")
	}
	c.send(msg{"type": "heartbeat"})
	for _, f := range c.until(isType("heartbeat-ack")) {
		// Frames already on the wire may come before the ack.
		if f.typ() != "audio" && f.typ() != "heartbeat-ack" {
			t.Fatalf("unexpected frame after the interrupt: %v", f)
		}
	}
	c.silent()

	c.turn("sorry, go on")
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	records := c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")["messages"].([]any)
	if r := records[1].(map[string]any); r["content"] != heard || r["interrupted"] != true {
		t.Fatalf("the interrupted reply is stored as %v, want %q", r, heard)
	}
}

func drainDisconnects(llm *fakellm.Server) {
	for {
		select {
		case <-llm.Disconnects():
		default:
			return
		}
	}
}

// espeak-ng's sentences stream too: a long sentence goes out in parts,
// each a complete WAV at espeak-ng's rate, its text on the first.
func TestEspeakStreamedTurn(t *testing.T) {
	requireEspeak(t)
	sentence := "This sentence is long enough for espeak-ng to speak it in several parts, one after another."
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(sentence)}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "espeak-ng"
	cfg.Character.TTS.StreamFirstMillis = 250
	cfg.Character.TTS.StreamPieceMillis = 1000
	cfg.Conversation.FasterFirstResponse = false
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	pieces := audioPieces(c.turn("speak"))
	if len(pieces) < 3 {
		t.Fatalf("%d audio frames for a sentence of about 5 s", len(pieces))
	}
	for i, p := range pieces {
		dt, hasText := p["display_text"].(map[string]any)
		if (i == 0) != hasText || (i == 0 && dt["text"] != sentence) {
			t.Fatalf("frame %d: display_text %v", i, p["display_text"])
		}
		b64, _ := p["audio"].(string)
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		f, pcm, err := wavio.Parse(data)
		if err != nil || f.Rate != 22050 || f.Channels != 1 || f.Bits != 16 || len(pcm) == 0 {
			t.Fatalf("frame %d: %+v, %d bytes, %v", i, f, len(pcm), err)
		}
		if v := len(p["volumes"].([]any)); v != (len(pcm)/2+440)/441 {
			t.Fatalf("frame %d: %d volumes for %d samples", i, v, len(pcm)/2)
		}
	}
}
