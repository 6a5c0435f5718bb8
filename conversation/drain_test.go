package conversation_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"koe"
	"koe/protocol"
	"koe/testkit/fakellm"
)

// A draining session refuses every new input before its turn starts (the
// running reply is not stopped by it, nothing of it is stored) and says
// when the running turn has ended and stored its reply whole.
func TestDrainRefusesNewTurnsAndWaitsForTheRunningOne(t *testing.T) {
	g := newGate(t)
	r := newRig(t, func(fakellm.Request) fakellm.Reply { return g.reply("All ", "of it.") })
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "the question"})
	r.until(protocol.TypeFullText, "") // the turn has started: Thinking...

	idle := make(chan struct{})
	if !r.sess.Drain(func() { close(idle) }) {
		t.Fatal("Drain saw no running turn")
	}
	for _, in := range []protocol.Inbound{
		{Type: protocol.TypeTextInput, Text: "a second question"},
		{Type: protocol.TypeAISpeakSignal},
	} {
		if err := r.sess.Dispatch(in); !errors.Is(err, koe.ErrRestarting) {
			t.Errorf("%s while draining: %v, want koe.ErrRestarting", in.Type, err)
		}
	}
	g.open()
	r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	r.until(protocol.TypeControl, protocol.ControlChainEnd)
	select {
	case <-idle:
	case <-time.After(hangGuard):
		t.Fatal("idle was not called after the running turn ended")
	}
	recs := r.records()
	if got := aiRecords(recs); !slices.Equal(got, []string{"All of it."}) {
		t.Errorf("AI records = %q, want the running reply whole", got)
	}
	for _, rec := range recs {
		if rec.Content == "a second question" {
			t.Error("the refused input was stored")
		}
	}
	if r.sess.Drain(func() { t.Error("idle called for an idle session") }) {
		t.Error("Drain of an idle session saw a running turn")
	}
}
