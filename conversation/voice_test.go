package conversation_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
	"koe/tts"
)

// pcm is 16 kHz 16-bit little-endian PCM: a tone of d at amp (0 = silence).
func pcm(d time.Duration, amp float64) []byte {
	n := int(d.Seconds() * 16000)
	out := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		v := int16(amp * 32767 * math.Sin(2*math.Pi*220*float64(i)/16000))
		binary.LittleEndian.PutUint16(out[2*i:], uint16(v))
	}
	return out
}

// utterance is speech with silence around it, enough for the detector to
// start and end an utterance.
func utterance() []byte {
	return slices.Concat(pcm(300*time.Millisecond, 0), pcm(600*time.Millisecond, 0.5), pcm(time.Second, 0))
}

func TestRecordingIsTranscribedAndAnswered(t *testing.T) {
	heard := &mock.Transcriber{TranscribeFn: func(_ context.Context, wav []byte) (string, error) {
		if len(wav) != 44+2*16000 {
			return "", errors.New("not the one-second WAV that was recorded")
		}
		return " what time is it ", nil
	}}
	r := newRig(t, fakellm.Echo(0), withASR(heard))
	samples := make([]float64, 16000)
	if err := r.sess.Dispatch(protocol.Inbound{Type: protocol.TypeMicAudioData, Audio: samples[:8000]}); err != nil {
		t.Fatal(err)
	}
	r.dispatch(protocol.Inbound{Type: protocol.TypeMicAudioData, Audio: samples[8000:]})
	r.dispatch(protocol.Inbound{Type: protocol.TypeMicAudioEnd})
	frames := r.until(protocol.TypeUserInputTranscription, "")
	if got := frames[len(frames)-1].Text; got != "what time is it" {
		t.Fatalf("transcription frame %q", got)
	}
	r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	r.until(protocol.TypeControl, protocol.ControlChainEnd)
	if recs := r.records(); len(recs) != 3 || recs[1].Content != "what time is it" || recs[2].Content != "You said: what time is it." {
		t.Fatalf("records = %+v", recs)
	}
}

// Nothing recognised: the chain ends at once so the client listens again,
// and the LLM is not asked.
func TestNothingHeardEndsTheChain(t *testing.T) {
	r := newRig(t, fakellm.Echo(0), withASR(&mock.Transcriber{TranscribeFn: func(context.Context, []byte) (string, error) { return "  ", nil }}))
	r.dispatch(protocol.Inbound{Type: protocol.TypeMicAudioData, Audio: make([]float64, 1600)})
	r.dispatch(protocol.Inbound{Type: protocol.TypeMicAudioEnd})
	frames := r.until(protocol.TypeControl, protocol.ControlChainEnd)
	if got := frameTypes(frames); !slices.Contains(got, protocol.TypeUserInputTranscription) || slices.Contains(got, protocol.TypeAudio) {
		t.Fatalf("frames %v", got)
	}
	if n := len(r.llm.Requests()); n != 0 {
		t.Fatalf("%d LLM requests for nothing said", n)
	}
}

// A recogniser's failure reaches the log; the client hears only that it
// failed, without the engine's paths and output.
func TestTranscriberFailureHidesItsDetails(t *testing.T) {
	r := newRig(t, fakellm.Echo(0), withASR(&mock.Transcriber{TranscribeFn: func(context.Context, []byte) (string, error) {
		return "", errors.New("asr: /usr/bin/pocketsphinx_continuous failed on /tmp/koe-123/utt.wav: ERROR: model missing")
	}}))
	r.dispatch(protocol.Inbound{Type: protocol.TypeMicAudioData, Audio: make([]float64, 1600)})
	r.dispatch(protocol.Inbound{Type: protocol.TypeMicAudioEnd})
	for _, f := range r.until(protocol.TypeControl, protocol.ControlChainEnd) {
		if f.Type == protocol.TypeError && (strings.Contains(f.Text, "/tmp") || strings.Contains(f.Text, "/usr/bin")) {
			t.Fatalf("error frame shows the engine's internals: %q", f.Text)
		}
	}
}

// The continuous stream: a pause while the first part is still being
// transcribed is no barge-in; both parts are heard again as one, and
// answered once.
func TestPauseJoinsTheParts(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	first := make(chan struct{})
	heard := &mock.Transcriber{TranscribeFn: func(ctx context.Context, wav []byte) (string, error) {
		mu.Lock()
		sizes = append(sizes, len(wav))
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-ctx.Done() // still transcribing when the user goes on
			return "", ctx.Err()
		}
		return "hello there how are you", nil
	}}
	r := newRig(t, fakellm.Echo(0), withASR(heard))
	if err := r.sess.FeedPCM(utterance()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	case <-time.After(hangGuard):
		t.Fatal("the first part never reached the recogniser")
	}
	if err := r.sess.FeedPCM(utterance()); err != nil {
		t.Fatal(err)
	}
	frames := r.until(protocol.TypeUserInputTranscription, "")
	for _, f := range frames {
		if f.Type == protocol.TypeControl && f.Text == protocol.ControlInterrupt {
			t.Fatalf("a pause was taken for a barge-in: %v", frameTypes(frames))
		}
	}
	r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	r.until(protocol.TypeControl, protocol.ControlChainEnd)
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[1] <= sizes[0] {
		t.Fatalf("recordings %v: the second must hold both parts", sizes)
	}
	if n := len(r.llm.Requests()); n != 1 {
		t.Fatalf("%d LLM calls, want one answer for the whole sentence", n)
	}
}

// A piece whose synthesis fails is sent as text in its place; the others
// are spoken, in order.
func TestSynthesisFailureBecomesATextPiece(t *testing.T) {
	tone, err := tts.FromPCM16LE(pcm(200*time.Millisecond, 0.5), 16000)
	if err != nil {
		t.Fatal(err)
	}
	syn := &mock.Synthesizer{SynthesizeFn: func(_ context.Context, text string) (tts.Audio, error) {
		if strings.Contains(text, "Second") {
			return tts.Audio{}, errors.New("engine choked")
		}
		return tone, nil
	}}
	r := newRig(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("First one. Second one. Third one.")}), withTTS(syn))
	var pieces []string
	for _, f := range r.turn("go") {
		if f.Type != protocol.TypeAudio {
			continue
		}
		var a protocol.Audio
		mustUnmarshal(t, f.JSON, &a)
		how := " (text)"
		if a.Audio != nil {
			how = " (spoken)"
		}
		pieces = append(pieces, strings.TrimSpace(a.DisplayText.Text)+how)
	}
	if want := []string{"First one. (spoken)", "Second one. (text)", "Third one. (spoken)"}; !slices.Equal(pieces, want) {
		t.Fatalf("pieces %q, want %q", pieces, want)
	}
}
