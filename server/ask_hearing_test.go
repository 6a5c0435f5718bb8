package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/config"
	"koe/testkit/fakellm"
)

// While a spoken answer is being transcribed, another recording is refused
// with an error frame instead of queueing a transcription of its own: a
// client cannot pile recordings onto the ASR slots every session shares.
// The answer being heard still answers the question.
func TestSpokenAnswersOneAtATime(t *testing.T) {
	llm := startLLM(t, askingModel(call("srv__delete_note", `{"name":"ideas"}`), ""))
	arrived := make(chan struct{}, 4)
	release, done := make(chan struct{}), make(chan struct{})
	// Cleanups run last-in first-out: a held transcription lets go before
	// the server closes, should the test fail holding it.
	t.Cleanup(func() { close(done) })
	llm.SetTranscription(func(fakellm.TranscriptionRequest) fakellm.TranscriptionReply {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-done:
		}
		return fakellm.TranscriptionReply{Text: "Yes, please."}
	})
	m := startAskKoe(t, llm, askServer(t), func(cfg *config.Config) { *cfg = withFakeASR(*cfg, llm) })
	c := dialURL(t, websocket.DefaultDialer, "ws://"+m.Addr()+"/client-ws?client_uid=desk", nil)
	for range 5 {
		c.next()
	}
	c.send(textInput("Delete ideas."))
	c.until(func(f msg) bool {
		dt, _ := f["display_text"].(map[string]any)
		return f.typ() == "audio" && dt != nil && strings.Contains(dt["text"].(string), "May I run srv__delete_note")
	})
	c.sendMic(tone(time.Second, 0.3))
	select {
	case <-arrived:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the answer was never sent to be transcribed")
	}
	c.sendMic(tone(time.Second, 0.3))
	refused := c.until(isType("error"))
	if got := refused[len(refused)-1].str("message"); !strings.Contains(got, "still hearing your last answer") {
		t.Fatalf("the second recording got %q", got)
	}
	close(release)
	finish(c)
	if r := toolResult(t, llm); r != "deleted ideas; left: groceries" {
		t.Fatalf("the model was told %q", r)
	}
	if n := len(llm.TranscriptionRequests()); n != 1 {
		t.Fatalf("%d transcriptions, want the one answer", n)
	}
}
