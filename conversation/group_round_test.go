package conversation_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"koe"
	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/mock"
)

// roundRig is a rig whose two characters have names of their own (Aki,
// the default, and Bo), with one text-only session for each, and the
// fake LLM answering as whichever character the group prompt says it is.
type roundRig struct {
	*rig
	aki, bo *conversation.Session
	mu      sync.Mutex
	asked   []fakellm.Request // every LLM request, in order
}

func newRoundRig(t *testing.T, answer func(req fakellm.Request, speaker string) fakellm.Reply) *roundRig {
	t.Helper()
	rr := &roundRig{}
	rr.rig = newRig(t, func(req fakellm.Request) fakellm.Reply {
		rr.mu.Lock()
		rr.asked = append(rr.asked, req)
		rr.mu.Unlock()
		return answer(req, koetest.GroupSpeaker(req))
	})
	aki := rr.chars.DefaultChar
	aki.Name, aki.Persona = "Aki", "You are Aki."
	rr.chars.DefaultChar = aki
	bo := rr.chars.Files["other.yaml"]
	bo.Name, bo.Persona = "Bo", "You are Bo."
	rr.chars.Files["other.yaml"] = bo
	rr.aki = rr.hub.Open(rr.ctx, mock.NewSender(1<<12), conversation.SessionOptions{ClientUID: "aki-client", TextOnly: true})
	t.Cleanup(rr.aki.Close)
	rr.bo = rr.hub.Open(rr.ctx, mock.NewSender(1<<12), conversation.SessionOptions{ClientUID: "bo-client", TextOnly: true})
	t.Cleanup(rr.bo.Close)
	if err := rr.bo.Dispatch(protocol.Inbound{Type: protocol.TypeSwitchConfig, File: "other.yaml"}); err != nil {
		t.Fatal(err)
	}
	return rr
}

func (rr *roundRig) history(s *conversation.Session) []koe.Record {
	rr.t.Helper()
	info := s.Info()
	recs, err := rr.real.Messages(rr.t.Context(), info.ConfUID, info.HistoryUID)
	if err != nil {
		rr.t.Fatal(err)
	}
	return recs
}

// A round: each character answers in turn, seeing what was said since it
// last spoke with every line naming its speaker; each keeps the group's
// lines in its own history, the group's record keeps them all, and a
// listener gets every reply once, in order, its audio marked forwarded.
func TestRoundRepliesInOrderOnASharedTranscript(t *testing.T) {
	rr := newRoundRig(t, func(_ fakellm.Request, speaker string) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words(speaker + " speaks.")}
	})
	tr := conversation.NewTranscript(rr.real)
	if err := tr.Add(t.Context(), conversation.Line{Name: "Mika", Text: "hello both"}); err != nil {
		t.Fatal(err)
	}
	listener := mock.NewSender(1 << 12)
	res, err := rr.hub.RunRound(t.Context(), conversation.RoundOptions{
		Transcript: tr, Speakers: []*conversation.Session{rr.aki, rr.bo}, Replies: 3, People: []string{"Mika"},
		Audience: []conversation.Listener{{Out: listener}},
	})
	if err != nil || res.Stopped {
		t.Fatalf("round: %v, stopped %v", err, res.Stopped)
	}
	var said []string
	for _, l := range res.Replies {
		said = append(said, l.Name+": "+l.Text)
	}
	if want := []string{"Aki: Aki speaks.", "Bo: Bo speaks.", "Aki: Aki speaks."}; !slices.Equal(said, want) {
		t.Fatalf("replies %q, want %q", said, want)
	}
	rr.mu.Lock()
	asked := slices.Clone(rr.asked)
	rr.mu.Unlock()
	if len(asked) != 3 {
		t.Fatalf("%d LLM requests, want 3", len(asked))
	}
	// What each was given: the lines since it last spoke, named.
	for i, want := range []string{"Mika: hello both", "Mika: hello both\nAki: Aki speaks.", "Bo: Bo speaks."} {
		if got := liveLastUser(asked[i]); !strings.Contains(got, want) {
			t.Errorf("request %d's user message %q does not hold %q", i, got, want)
		}
	}
	if sys := asked[1].Messages[0].Content; !strings.Contains(sys, "You are Bo, talking in a group") || !strings.Contains(sys, "Aki") || !strings.Contains(sys, "Mika") {
		t.Errorf("Bo's system prompt does not name the group: %q", sys)
	}
	// Each character's own history holds the group's conversation.
	if got, want := aiRecords(rr.history(rr.aki)), []string{"Aki speaks.", "Aki speaks."}; !slices.Equal(got, want) {
		t.Errorf("Aki's history has replies %q, want %q", got, want)
	}
	if recs := rr.history(rr.bo); len(recs) < 2 || !strings.Contains(recs[len(recs)-2].Content, "Aki: Aki speaks.") {
		t.Errorf("Bo's history does not hold what Aki said: %+v", recs)
	}
	// The group's own record.
	recs, err := rr.real.Messages(t.Context(), conversation.GroupConf, tr.RecordUID())
	if err != nil {
		t.Fatal(err)
	}
	var record []string
	for _, r := range recs {
		if r.Role == koe.RoleHuman || r.Role == koe.RoleAI {
			record = append(record, r.Name+": "+r.Content)
		}
	}
	if want := []string{"Mika: hello both", "Aki: Aki speaks.", "Bo: Bo speaks.", "Aki: Aki speaks."}; !slices.Equal(record, want) {
		t.Fatalf("group record %q, want %q", record, want)
	}
	// The listener saw three chains, each reply once, in order.
	var shown []string
	chains := 0
	for _, f := range listener.All() {
		switch {
		case f.Type == protocol.TypeControl && f.Text == protocol.ControlChainStart:
			chains++
		case f.Type == protocol.TypeAudio:
			var a protocol.Audio
			mustUnmarshal(t, f.JSON, &a)
			if !a.Forwarded {
				t.Errorf("the listener's audio is not marked forwarded: %s", f.JSON)
			}
			shown = append(shown, a.DisplayText.Name+": "+a.DisplayText.Text)
		case f.Type == protocol.TypeToken:
			t.Errorf("an OLV listener got koe's token event")
		}
	}
	if want := []string{"Aki: Aki speaks.", "Bo: Bo speaks.", "Aki: Aki speaks."}; chains != 3 || !slices.Equal(shown, want) {
		t.Fatalf("listener saw %d chains and %q, want 3 and %q", chains, shown, want)
	}
}

// One stop ends the round for all: the reply being made keeps what was
// heard, and no later character is asked.
func TestRoundStopEndsItForAll(t *testing.T) {
	var g *gate
	var calls atomic.Int32
	rr := newRoundRig(t, func(_ fakellm.Request, speaker string) fakellm.Reply {
		calls.Add(1)
		return g.reply(speaker, " goes", " on and on.")
	})
	g = newGate(t)
	tr := conversation.NewTranscript(rr.real)
	if err := tr.Add(t.Context(), conversation.Line{Name: "Mika", Text: "talk"}); err != nil {
		t.Fatal(err)
	}
	listener := mock.NewSender(1 << 12)
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan conversation.RoundResult, 1)
	go func() {
		res, err := rr.hub.RunRound(ctx, conversation.RoundOptions{
			Transcript: tr, Speakers: []*conversation.Session{rr.aki, rr.bo}, Replies: 2,
			Audience: []conversation.Listener{{Out: listener, KoeEvents: true}},
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// The first token reached the audience: Aki is speaking.
	for f := range listener.Frames {
		if f.Type == protocol.TypeToken {
			break
		}
	}
	cancel(conversation.RoundInterrupted("Aki"))
	res := <-done
	if !res.Stopped || len(res.Replies) != 1 || res.Replies[0].Text != "Aki" {
		t.Fatalf("round after the stop: %+v", res)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d LLM calls: the round went on after the stop", n)
	}
	if got, want := aiRecords(rr.history(rr.aki)), []string{"Aki [interrupted]"}; !slices.Equal(got, want) {
		t.Fatalf("Aki's history %q, want %q", got, want)
	}
	// Nothing of the stopped reply reaches the audience after the stop.
	for _, f := range listener.All() {
		if f.Type == protocol.TypeControl && f.Text == protocol.ControlChainEnd && !f.Dropped {
			var raw map[string]any
			_ = json.Unmarshal(f.JSON, &raw)
			t.Fatalf("the audience got chain-end of a stopped reply: %v", raw)
		}
	}
}

// A character whose LLM call fails does not end the round: the next one
// answers, and the round reports the failure. A character alone does not
// answer itself.
func TestRoundGoesOnAfterAFailureAndNeverTalksToItself(t *testing.T) {
	rr := newRoundRig(t, func(_ fakellm.Request, speaker string) fakellm.Reply {
		if speaker == "Aki" {
			return fakellm.Reply{Status: 500, ErrorMessage: "Aki's model is down"}
		}
		return fakellm.Reply{Tokens: fakellm.Words(speaker + " speaks.")}
	})
	tr := conversation.NewTranscript(rr.real)
	if err := tr.Add(t.Context(), conversation.Line{Name: "Mika", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	res, err := rr.hub.RunRound(t.Context(), conversation.RoundOptions{Transcript: tr, Speakers: []*conversation.Session{rr.aki, rr.bo}, Replies: 2})
	if err == nil || !strings.Contains(err.Error(), "Aki's reply") {
		t.Fatalf("round error %v, want Aki's failure", err)
	}
	if len(res.Replies) != 1 || res.Replies[0].Name != "Bo" || res.Stopped {
		t.Fatalf("replies %+v (stopped %v), want Bo's", res.Replies, res.Stopped)
	}
	res, err = rr.hub.RunRound(t.Context(), conversation.RoundOptions{Transcript: tr, Speakers: []*conversation.Session{rr.bo}, Replies: 3})
	if err != nil || len(res.Replies) != 0 {
		t.Fatalf("Bo alone, with nothing new said: %+v, %v", res.Replies, err)
	}
	if err := tr.Add(t.Context(), conversation.Line{Name: "Mika", Text: "and you?"}); err != nil {
		t.Fatal(err)
	}
	res, err = rr.hub.RunRound(t.Context(), conversation.RoundOptions{Transcript: tr, Speakers: []*conversation.Session{rr.bo}, Replies: 3})
	if err != nil || len(res.Replies) != 1 {
		t.Fatalf("Bo alone answered %+v, %v; want one reply", res.Replies, err)
	}
}

// Two sessions with the same character are two speakers: each is given
// the lines since it spoke itself.
func TestRoundTwoSessionsOfOneCharacter(t *testing.T) {
	rr := newRoundRig(t, func(_ fakellm.Request, speaker string) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words(speaker + " speaks.")}
	})
	twin := rr.hub.Open(rr.ctx, mock.NewSender(1<<12), conversation.SessionOptions{ClientUID: "aki-twin", TextOnly: true})
	t.Cleanup(twin.Close)
	tr := conversation.NewTranscript(rr.real)
	if err := tr.Add(t.Context(), conversation.Line{Name: "Mika", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	res, err := rr.hub.RunRound(t.Context(), conversation.RoundOptions{Transcript: tr, Speakers: []*conversation.Session{rr.aki, twin}, Replies: 2})
	if err != nil || len(res.Replies) != 2 {
		t.Fatalf("round: %+v, %v", res.Replies, err)
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if got := liveLastUser(rr.asked[1]); !strings.Contains(got, "Mika: hello\nAki: Aki speaks.") {
		t.Fatalf("the second Aki was given %q", got)
	}
}

// A reasoning model's thinking stays its own: the next character is
// given, and the group's record keeps, only what was said.
func TestRoundKeepsThinkingOut(t *testing.T) {
	rr := newRoundRig(t, func(_ fakellm.Request, speaker string) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words("<think>a secret plan of " + speaker + "</think> " + speaker + " speaks.")}
	})
	tr := conversation.NewTranscript(rr.real)
	if err := tr.Add(t.Context(), conversation.Line{Name: "Mika", Text: "hello both"}); err != nil {
		t.Fatal(err)
	}
	res, err := rr.hub.RunRound(t.Context(), conversation.RoundOptions{
		Transcript: tr, Speakers: []*conversation.Session{rr.aki, rr.bo}, Replies: 2, People: []string{"Mika"},
	})
	if err != nil || len(res.Replies) != 2 {
		t.Fatalf("round: %v, %d replies", err, len(res.Replies))
	}
	rr.mu.Lock()
	asked := slices.Clone(rr.asked)
	rr.mu.Unlock()
	if got := liveLastUser(asked[1]); strings.Contains(got, "secret plan") || !strings.Contains(got, "Aki: Aki speaks.") {
		t.Errorf("Bo was given %q: Aki's words without its thinking expected", got)
	}
	recs, err := rr.real.Messages(t.Context(), conversation.GroupConf, tr.RecordUID())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if strings.Contains(r.Content, "secret plan") {
			t.Errorf("the group's record keeps thinking: %q", r.Content)
		}
	}
}
