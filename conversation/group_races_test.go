package conversation_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe"
	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
)

// groupPair is a rig whose session (client-1) has invited a second OLV
// session (client-2): a group of two.
func groupPair(t *testing.T, r *rig) (other *conversation.Session, otherOut *mock.Sender) {
	t.Helper()
	otherOut = mock.NewSender(1 << 14)
	other = r.hub.Open(r.ctx, otherOut, conversation.SessionOptions{ClientUID: "client-2"})
	t.Cleanup(other.Close)
	r.dispatch(protocol.Inbound{Type: protocol.TypeAddClientToGroup, InviteeUID: "client-2"})
	r.until(protocol.TypeGroupUpdate, "")
	return other, otherOut
}

// A member's message while the round it stops is still storing its reply
// returns at once: the new round waits for the store in its own
// goroutine, not in the client's read loop nor under a lock.
func TestGroupMessageDoesNotWaitForTheStoppedRound(t *testing.T) {
	r := newRig(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Hello there.")} })
	storing, gate := make(chan struct{}), make(chan struct{})
	var first sync.Once
	r.store.AppendFn = func(ctx context.Context, conf, uid string, rec koe.Record) error {
		if rec.Role == koe.RoleAI && conf != conversation.GroupConf {
			held := false
			first.Do(func() { held = true })
			if held {
				close(storing)
				<-gate
			}
		}
		return r.real.Append(ctx, conf, uid, rec)
	}
	other, _ := groupPair(t, r)
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release)

	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "first"})
	r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	played(other)
	select {
	case <-storing:
	case <-time.After(hangGuard):
		t.Fatal("the first reply was never stored")
	}
	returned := make(chan error, 1)
	go func() { returned <- other.Dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "second"}) }()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("the second message: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the second message waited for the stopped round's store")
	}
	release()
	// The second message's round runs once the first has ended.
	r.until(protocol.TypeUserInputTranscription, "second")
}

// A message said as a member is leaving (marked, not yet taken out of
// the group: leaveGroup's stop of the round came before the message's
// round was there to stop) starts a round without it.
func TestGroupRoundLeavesOutALeavingMember(t *testing.T) {
	first := make(chan fakellm.Request, 1)
	r := newRig(t, func(req fakellm.Request) fakellm.Reply {
		select {
		case first <- req:
		default:
		}
		return fakellm.Reply{Tokens: fakellm.Words("Hello there.")}
	})
	groupPair(t, r)
	third := r.hub.Open(r.ctx, mock.NewSender(1<<14), conversation.SessionOptions{ClientUID: "client-3"})
	t.Cleanup(third.Close)
	r.dispatch(protocol.Inbound{Type: protocol.TypeAddClientToGroup, InviteeUID: "client-3"})
	r.until(protocol.TypeGroupUpdate, "")

	conversation.MarkLeaving(third)
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "hello"})
	var req fakellm.Request
	select {
	case req = <-first:
	case <-time.After(hangGuard):
		t.Fatal("no character was asked")
	}
	sys := req.Messages[0].Content
	if !strings.Contains(sys, "client-2") || strings.Contains(sys, "client-3") {
		t.Fatalf("the round's group prompt %q: want client-2 in it and the leaving client-3 out", sys)
	}
}

// A member's message during a drain is refused with koe.ErrRestarting,
// as a one-client input is, before it stops anything: the reply the drain
// waits for goes on to its end.
func TestGroupMessageDuringADrainIsRefused(t *testing.T) {
	g := newGate(t)
	r := newRig(t, func(fakellm.Request) fakellm.Reply { return g.reply("Hello ", "there.") })
	other, _ := groupPair(t, r)

	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "first"})
	r.until(protocol.TypeControl, protocol.ControlChainStart)
	idle := make(chan struct{})
	if !r.sess.Drain(func() { close(idle) }) {
		t.Fatal("the drain found no turn running")
	}
	other.Drain(func() {})
	if err := other.Dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "second"}); !errors.Is(err, koe.ErrRestarting) {
		t.Fatalf("a group message during a drain: %v, want koe.ErrRestarting", err)
	}
	g.open()
	got := r.until(protocol.TypeBackendSynthComplete, "")
	played(r.sess)
	played(other)
	for _, f := range got {
		if f.Type == protocol.TypeInterruptSignal {
			t.Fatal("the reply the drain waits for was stopped")
		}
	}
	select {
	case <-idle:
	case <-time.After(hangGuard):
		t.Fatal("the drained turn never ended")
	}
}

// A reply that fails is an error frame for every member, not only the
// speaker's client, and a chat API post into the group gets it as an
// event and as its Run's error, as a one-client chat turn does.
func TestGroupFailedReplyReachesEveryone(t *testing.T) {
	r := newRig(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Status: 400, ErrorMessage: "the model is not loaded"}
	})
	_, otherOut := groupPair(t, r)
	chatOut := mock.NewSender(1 << 14)
	chat, err := r.hub.OpenChat(r.ctx, protocol.ChatRequest{GroupID: "group_client-1", Message: "hello", Name: "Viewer"}, chatOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := chat.Run(); err == nil {
		t.Error("the chat API's group post ran with no error though every reply failed")
	}
	for name, out := range map[string]*mock.Sender{"the other member": otherOut, "the chat stream": chatOut} {
		errs := 0
		for _, f := range out.All() {
			if f.Type == protocol.TypeError {
				errs++
			}
		}
		if errs != 2 {
			t.Errorf("%s got %d error frames, want one per failed reply (2)", name, errs)
		}
	}
}

// A transcript holds only the lines some speaker has not been given yet
// (and the latest round's), not the group's whole life; each character
// is still given exactly what was said since it last spoke.
func TestTranscriptDropsLinesEverySpeakerHas(t *testing.T) {
	rr := newRoundRig(t, func(_ fakellm.Request, speaker string) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words(speaker + " speaks.")}
	})
	tr := conversation.NewTranscript(rr.real)
	const rounds = 5
	for i := 1; i <= rounds; i++ {
		if err := tr.Add(t.Context(), conversation.Line{Name: "Mika", Text: fmt.Sprintf("line %d", i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := rr.hub.RunRound(t.Context(), conversation.RoundOptions{
			Transcript: tr, Speakers: []*conversation.Session{rr.aki, rr.bo}, Replies: 2, People: []string{"Mika"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if held := conversation.HeldLines(tr); held > 4 {
		t.Errorf("the transcript holds %d lines after %d rounds of 3; want those of about one round", held, rounds)
	}
	rr.mu.Lock()
	asked := slices.Clone(rr.asked)
	rr.mu.Unlock()
	for i, want := range map[int]string{len(asked) - 2: "Bo: Bo speaks.\nMika: line 5", len(asked) - 1: "Mika: line 5\nAki: Aki speaks."} {
		if got := liveLastUser(asked[i]); !strings.HasSuffix(got, want) || strings.Contains(got, "line 4") {
			t.Errorf("request %d was given %q, want %q", i, got, want)
		}
	}
}
