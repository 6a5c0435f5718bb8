package conversation_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
	"koe/tts"
)

// rtaSecondTTS speaks every piece as one second of tone.
func rtaSecondTTS(t *testing.T) rigOption {
	tone, err := tts.FromPCM16LE(pcm(time.Second, 0.5), 16000)
	if err != nil {
		t.Fatal(err)
	}
	return withTTS(&mock.Synthesizer{SynthesizeFn: func(context.Context, string) (tts.Audio, error) { return tone, nil }})
}

// rtaStoredReply waits for the turn's stored answer (koe's message event)
// and returns the records' replies.
func (r *rig) rtaStoredReply() []string {
	r.t.Helper()
	for {
		f := r.next()
		if f.Type != protocol.TypeMessage {
			continue
		}
		var m protocol.MessageEvent
		mustUnmarshal(r.t, f.JSON, &m)
		if m.Content.Type == protocol.MessageAI {
			return aiRecords(r.records())
		}
	}
}

// A barge-in stops the reply at once; what is stored waits for the
// client's truncate, which keeps the pieces played whole and the whole
// words of the one playing.
func TestBargeInStoresWhatTheTruncateSays(t *testing.T) {
	r := newRig(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("One two three. Four five six. Seven eight nine.")}), rtaSecondTTS(t))
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "count"})
	r.until(protocol.TypeBackendSynthComplete, "")
	if !r.sess.BargeIn() {
		t.Fatal("no reply to barge in on")
	}
	if r.sess.BargeIn() {
		t.Fatal("a second barge-in found a reply to stop")
	}
	// 1.5 s: the first piece whole and half of the second.
	if heard, ok := r.sess.Truncate(1500 * time.Millisecond); !ok || heard != "One two three. Four" {
		t.Fatalf("the barged-in reply took the truncate as %q, %v", heard, ok)
	}
	if got, want := r.rtaStoredReply(), []string{"One two three. Four [interrupted]"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	if _, ok := r.sess.Truncate(time.Second); ok {
		t.Fatal("a truncate after the turn ended found a reply")
	}
}

// A truncate during playback, with no barge-in before it, stops the reply
// and stores as much; with none at all, a barge-in keeps what had had the
// time to play when the next turn starts.
func TestTruncateWithoutBargeIn(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("One two three. Four five six.")},
		fakellm.Reply{Tokens: fakellm.Words("Seven eight nine.")},
		fakellm.Reply{Tokens: fakellm.Words("Ten.")},
	), rtaSecondTTS(t))
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "count"})
	r.until(protocol.TypeBackendSynthComplete, "")
	if _, ok := r.sess.Truncate(2500 * time.Millisecond); !ok {
		t.Fatal("no reply to truncate")
	}
	if got, want := aiRecords(r.records()), []string{"One two three. Four five six. [interrupted]"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "more"})
	r.until(protocol.TypeBackendSynthComplete, "")
	r.sess.BargeIn()
	// No truncate: the next turn settles it with what had started to
	// play when the user spoke (the first piece, from its first audio).
	r.turn("again")
	if got, want := aiRecords(r.records()), []string{"One two three. Four five six. [interrupted]", "Seven eight nine. [interrupted]", "Ten."}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
}
