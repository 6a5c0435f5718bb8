package tts

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/internal/wavio"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
)

// streamOf opens a stream of text on e, which must stream.
func streamOf(t *testing.T, e Engine, text string) *Stream {
	t.Helper()
	st, ok := e.(StreamSynthesizer)
	if !ok {
		t.Fatalf("%T does not stream", e)
	}
	s, err := st.SynthesizeStream(testCtx(t), text)
	if err != nil {
		t.Fatalf("SynthesizeStream: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The streamed samples are the whole answer's samples, in both formats,
// from a server that paces its answer as a streaming engine does.
func TestOpenAIStreamMatchesWhole(t *testing.T) {
	s := fakellmtest.Start(t)
	text := "Streaming speech, piece by piece."
	for _, format := range []string{"wav", "pcm"} {
		cfg := openAIConfig(s.URL())
		cfg.OpenAI.Format = format
		e := newOpenAIEngine(t, cfg)
		s.SetSpeech(nil)
		whole, err := e.Synthesize(testCtx(t), text)
		if err != nil {
			t.Fatal(err)
		}
		s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
			return fakellm.SpeechReply{Stream: &fakellm.SpeechStream{TTFB: time.Millisecond, Pace: 50}}
		})
		got, err := streamOf(t, e, text).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if got.SampleRate != 24000 || !slices.Equal(got.Samples, whole.Samples) {
			t.Fatalf("%s: streamed %d samples at %d Hz, whole answer %d", format, len(got.Samples), got.SampleRate, len(whole.Samples))
		}
	}
}

// heldServer answers every speech request with head, then waits for
// release before sending tail: a server in the middle of synthesising.
func heldServer(t *testing.T, head, tail []byte, release <-chan struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "audio/wav")
		_, _ = w.Write(head)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
			_, _ = w.Write(tail)
		case <-r.Context().Done():
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/v1"
}

// The first samples are readable while the server has not finished: koe
// does not wait for the end of the answer.
func TestOpenAIStreamReadsAsItArrives(t *testing.T) {
	first, rest := sine(4800, 24000, 220, 0.5), sine(4800, 24000, 330, 0.5)
	f := wavio.Format{Tag: wavio.FormatPCM, Channels: 1, Rate: 24000, Bits: 16}
	head := wavio.AppendHeader(nil, f, 0) // 0: the length is not known yet
	head = append(head, pcmBytes(first, 16)...)
	release := make(chan struct{})
	url := heldServer(t, head, pcmBytes(rest, 16), release)

	s := streamOf(t, newOpenAIEngine(t, openAIConfig(url)), "hello")
	buf := make([]int16, len(first))
	n := 0
	for n < len(first) {
		m, err := s.Read(buf[n:])
		if err != nil {
			t.Fatalf("after %d samples: %v", n, err)
		}
		n += m
	}
	if !slices.Equal(buf, first) {
		t.Fatal("the first samples differ")
	}
	close(release)
	a, err := s.ReadAll()
	if err != nil || !slices.Equal(a.Samples, rest) {
		t.Fatalf("the rest: %d samples, %v", len(a.Samples), err)
	}
}

// A stereo float WAV with a LIST chunk and the placeholders of a
// streaming writer reads as mono 16-bit, as Normalize reads it.
func TestStreamWAVFormats(t *testing.T) {
	values := []float64{0.5, -0.5, 0.25, 0.25, -1, 1, 0.75, 0.25}
	file := wavBytes(u32(0xffffffff),
		chunk{id: "LIST", body: []byte("odd")},
		fmtChunk(wavio.FormatFloat, 2, 16000, 32),
		chunk{id: "data", body: floatBytes(values, 32), size: u32(0x7ffff000)})
	want, err := Normalize(file)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newWAVStream(iotestOneByte(file))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadAll()
	if err != nil || got.SampleRate != 16000 || !slices.Equal(got.Samples, want.Samples) {
		t.Fatalf("got %v at %d Hz (%v), want %v", got.Samples, got.SampleRate, err, want.Samples)
	}

	// A data size that is not a placeholder is honoured: what follows is
	// not audio.
	exact := wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 8000, 16), chunk{id: "data", body: pcmBytes([]int16{1, 2, 3}, 16)})
	exact = append(exact, "trailing junk"...)
	s, err = newWAVStream(bytes.NewReader(exact))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadAll(); err != nil || !slices.Equal(got.Samples, []int16{1, 2, 3}) {
		t.Fatalf("exact size: %v, %v", got.Samples, err)
	}
}

// iotestOneByte hands out data one byte per Read, as a slow network may.
func iotestOneByte(data []byte) io.Reader { return &oneByte{data} }

type oneByte struct{ data []byte }

func (r *oneByte) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0], r.data = r.data[0], r.data[1:]
	return 1, nil
}

// What a broken or hostile server streams is bounded: garbage is refused
// at its first bytes, endless chunks before the audio at 64 KiB, endless
// audio at maxAudioBytes, and an answer that trickles on past tts.timeout
// is cut off there.
func TestOpenAIStreamHostile(t *testing.T) {
	s := fakellmtest.Start(t)
	f := wavio.Format{Tag: wavio.FormatPCM, Channels: 1, Rate: 24000, Bits: 16}
	header := string(wavio.AppendHeader(nil, f, 0))
	cases := []struct {
		name  string
		reply fakellm.SpeechReply
		want  string
		most  int64 // bytes koe may read
	}{
		{"garbage", fakellm.SpeechReply{Flood: &fakellm.Flood{ContentType: "audio/wav", Fill: "<html>nope</html>", Size: 1 << 30}},
			"no RIFF/WAVE header", 1 << 20},
		{"endless chunks", fakellm.SpeechReply{Flood: &fakellm.Flood{ContentType: "audio/wav", Head: "RIFF\xff\xff\xff\xffWAVE", Fill: "JUNK\x00\x10\x00\x00" + strings.Repeat("j", 4096), Size: 1 << 30}},
			"more than 64 KiB of chunks", 1 << 20},
		{"endless audio", fakellm.SpeechReply{Flood: &fakellm.Flood{ContentType: "audio/wav", Head: header, Fill: "\x01\x02", Size: 1 << 40}},
			"more than 50 MB of audio", maxAudioBytes + 8<<20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply { return c.reply })
			hc, read := fakellmtest.CountingClient(t)
			e, err := New(openAIConfig(s.URL()), hc)
			if err != nil {
				t.Fatal(err)
			}
			st, err := e.(StreamSynthesizer).SynthesizeStream(testCtx(t), "hello")
			if err == nil {
				_, err = st.ReadAll()
				st.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if got := read.Load(); got > c.most {
				t.Errorf("koe read %d bytes", got)
			}
		})
	}

	t.Run("trickle", func(t *testing.T) {
		s.SetSpeech(func(fakellm.SpeechRequest) fakellm.SpeechReply {
			// 0.01 times real time: the sentence would take minutes.
			return fakellm.SpeechReply{Stream: &fakellm.SpeechStream{TTFB: time.Millisecond, Pace: 0.01}}
		})
		cfg := openAIConfig(s.URL())
		cfg.Timeout = 300 * time.Millisecond
		st := streamOf(t, newOpenAIEngine(t, cfg), "a sentence that trickles")
		_, err := st.ReadAll()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "tts.timeout") {
			t.Fatalf("error %v, want the tts.timeout", err)
		}
	})
}

// espeak-ng's output read as it goes is the same speech as its whole
// output, and closing a stream early kills the process.
func TestEspeakStream(t *testing.T) {
	e := newTestEspeak(t)
	text := "The quick brown fox jumps over the lazy dog, twice."
	whole, err := e.Synthesize(testCtx(t), text)
	if err != nil {
		t.Fatal(err)
	}
	got, err := streamOf(t, e, text).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got.SampleRate != whole.SampleRate || !slices.Equal(got.Samples, whole.Samples) {
		t.Fatalf("streamed %d samples at %d Hz, whole %d at %d Hz", len(got.Samples), got.SampleRate, len(whole.Samples), whole.SampleRate)
	}

	s := streamOf(t, e, longText())
	if _, err := s.Read(make([]int16, 100)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]int16, 100)); err == nil {
		t.Fatal("a closed stream still reads")
	}
}
