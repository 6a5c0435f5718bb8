package conversation_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"koe"
	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
)

func TestTurnStoresBothMessages(t *testing.T) {
	r := newRig(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Hello! How are you?")}))
	frames := r.turn("hi there")
	var tokens strings.Builder
	for _, f := range frames {
		if f.Type == protocol.TypeToken {
			var m struct{ Content string }
			mustUnmarshal(t, f.JSON, &m)
			tokens.WriteString(m.Content)
		}
	}
	if tokens.String() != "Hello! How are you?" {
		t.Errorf("token frames join to %q", tokens.String())
	}
	recs := r.records()
	if len(recs) != 3 || recs[1].Role != koe.RoleHuman || recs[1].Content != "hi there" || recs[2].Content != "Hello! How are you?" {
		t.Fatalf("records = %+v", recs)
	}
}

// olvTurn plays one typed turn of an OLV client on r's hub, as its client
// does, checks that the client got none of koe's own events (a token, the
// memory state), and returns the session.
func olvTurn(t *testing.T, r *rig) *olvSession {
	t.Helper()
	out := newOLVSession(r)
	if err := out.sess.Dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	for {
		f := out.next(t)
		switch f.Type {
		case protocol.TypeToken, protocol.TypeMemoryState:
			t.Fatalf("an OLV client got %s", f.JSON)
		case protocol.TypeBackendSynthComplete:
			played(out.sess)
		}
		if f.Type == protocol.TypeControl && f.Text == protocol.ControlChainEnd {
			return out
		}
	}
}

// A stock OLV client never gets koe's own events.
func TestOLVClientGetsNoKoeEvents(t *testing.T) {
	r := newRig(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Hi.")}))
	out := olvTurn(t, r)
	// Asked for, koe's messages still come.
	if err := out.sess.Dispatch(protocol.Inbound{Type: protocol.TypeFetchMemoryState}); err != nil {
		t.Fatal(err)
	}
	if f := out.next(t); f.Type != protocol.TypeMemoryState {
		t.Fatalf("fetch-memory-state answered %s", f.JSON)
	}
}

func TestNewInputSupersedesRunningTurn(t *testing.T) {
	var g *gate
	var calls atomic.Int32
	r := newRig(t, func(req fakellm.Request) fakellm.Reply {
		if calls.Add(1) == 1 {
			return g.reply("First", " part", " never sent.")
		}
		return fakellm.Reply{Tokens: fakellm.Words("Second answer.")}
	})
	g = newGate(t)
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "one"})
	r.until(protocol.TypeToken, "")
	r.turn("two")
	if got, want := aiRecords(r.records()), []string{"First [interrupted]", "Second answer."}; !slices.Equal(got, want) {
		t.Fatalf("stored replies %q, want %q", got, want)
	}
}

func TestInterruptKeepsWhatWasHeard(t *testing.T) {
	var g *gate
	r := newRig(t, func(fakellm.Request) fakellm.Reply { return g.reply("Once upon", " a time", " there was.") })
	g = newGate(t)
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "tell me a story"})
	r.until(protocol.TypeToken, "")
	r.dispatch(protocol.Inbound{Type: protocol.TypeInterruptSignal, Text: "Once"})
	if got, want := aiRecords(r.records()), []string{"Once [interrupted]"}; !slices.Equal(got, want) {
		t.Fatalf("stored replies %q, want %q", got, want)
	}
	// Nothing of the stopped turn follows, not even chain-end.
	r.dispatch(protocol.Inbound{Type: protocol.TypeHeartbeat})
	for _, f := range r.until(protocol.TypeHeartbeatAck, "") {
		if f.Type == protocol.TypeControl && f.Text == protocol.ControlChainEnd {
			t.Fatal("conversation-chain-end after an interrupt")
		}
	}
}

func TestPlaybackCompleteCountsOnce(t *testing.T) {
	r := newRig(t, fakellm.Echo(0))
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "hi"})
	r.until(protocol.TypeBackendSynthComplete, "")
	for i := 0; i < 5; i++ {
		played(r.sess)
	}
	r.until(protocol.TypeControl, protocol.ControlChainEnd)
	r.turn("again") // the extra frames did not end the next turn early
	ends := 0
	for _, f := range r.out.All() {
		if f.Type == protocol.TypeControl && f.Text == protocol.ControlChainEnd {
			ends++
		}
	}
	if ends != 2 {
		t.Fatalf("%d chain-ends for two turns", ends)
	}
}

// A character switch while a background summary is being stored must not
// wait for the summary, and the summary's report must not call back into
// the session: that used to deadlock the session, and with it the REST
// API and shutdown.
func TestSwitchCharacterWhileSummaryIsStored(t *testing.T) {
	ctx := t.Context()
	r := newRig(t, fakellm.Echo(0))
	entered, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	r.store.AddSummaryFn = func(ctx context.Context, conf, uid string, rec koe.SummaryRecord) error {
		if once.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		return r.real.AddSummary(ctx, conf, uid, rec)
	}
	for _, text := range []string{"one", "two", "three"} {
		r.turn(text)
	}
	select {
	case <-entered:
	case <-time.After(hangGuard):
		t.Fatal("no summary was stored after three turns")
	}
	oldHistory := r.sess.Info().HistoryUID

	switched := make(chan error, 1)
	go func() {
		switched <- r.sess.Dispatch(protocol.Inbound{Type: protocol.TypeSwitchConfig, File: "other.yaml"})
	}()
	select {
	case err := <-switched:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		close(release)
		t.Fatal("SwitchCharacter waited for a summary being stored")
	}
	if got := r.sess.Info().ConfUID; got != "c2" {
		t.Fatalf("conf_uid after switch = %q", got)
	}
	infos := make(chan []protocol.SessionInfo, 1)
	go func() { infos <- r.hub.Sessions() }()
	select {
	case got := <-infos:
		if len(got) != 1 || got[0].ConfUID != "c2" {
			t.Fatalf("sessions = %+v", got)
		}
	case <-time.After(hangGuard):
		t.Fatal("the session list blocked")
	}
	close(release)
	r.turn("hello c2")
	// The old character's summary reaches its history (the hub waits for
	// retired agents to finish), not the client.
	r.hub.Close()
	if sums, err := r.real.Summaries(ctx, "c1", oldHistory); err != nil || len(sums) != 1 || sums[0].Turns[0] != 1 {
		t.Fatalf("the old history's summaries = %+v, %v; want the one being stored at the switch", sums, err)
	}
	for _, f := range r.out.All() {
		if f.Type == protocol.TypeMemoryState && strings.Contains(string(f.JSON), `"turns_covered":3`) {
			t.Fatalf("the old character's memory-state reached the client after the switch: %s", f.JSON)
		}
	}
}

func TestSetHistoryMidTurnFindsTheReply(t *testing.T) {
	var g *gate
	var calls atomic.Int32
	r := newRig(t, func(fakellm.Request) fakellm.Reply {
		if calls.Add(1) == 2 {
			return g.reply("Partial", " answer", " here.")
		}
		return fakellm.Reply{Tokens: fakellm.Words("Done.")}
	})
	g = newGate(t)
	r.turn("first")
	uid := r.sess.Info().HistoryUID
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "second"})
	r.until(protocol.TypeToken, "")
	var data protocol.HistoryData
	r.answer(protocol.Inbound{Type: protocol.TypeFetchAndSetHistory, HistoryUID: uid}, protocol.TypeHistoryData, &data)
	var contents []string
	for _, m := range data.Messages {
		contents = append(contents, m.Content)
	}
	if want := []string{"first", "Done.", "second", "Partial"}; !slices.Equal(contents, want) {
		t.Fatalf("history-data holds %q, want %q", contents, want)
	}
	if !data.Messages[3].Interrupted {
		t.Error("the cut reply is not marked interrupted")
	}
}

func TestNewHistoryDropsAnUnusedOne(t *testing.T) {
	ctx := t.Context()
	r := newRig(t, fakellm.Echo(0))
	newHistory := func() string {
		var created protocol.NewHistoryCreated
		r.answer(protocol.Inbound{Type: protocol.TypeCreateNewHistory}, protocol.TypeNewHistoryCreated, &created)
		return created.HistoryUID
	}
	first := newHistory()
	newHistory()
	if _, err := r.real.Messages(ctx, "c1", first); !errors.Is(err, koe.ErrNotFound) {
		t.Fatalf("unused history still there: %v", err)
	}
	r.turn("keep this history")
	used := r.sess.Info().HistoryUID
	newHistory()
	if _, err := r.real.Messages(ctx, "c1", used); err != nil {
		t.Fatalf("a used history was dropped: %v", err)
	}
}

func TestDeleteCurrentHistoryEmptiesMemory(t *testing.T) {
	r := newRig(t, fakellm.Echo(0))
	r.turn("remember the word banana")
	uid := r.sess.Info().HistoryUID
	del := func() bool {
		var deleted protocol.HistoryDeleted
		r.answer(protocol.Inbound{Type: protocol.TypeDeleteHistory, HistoryUID: uid}, protocol.TypeHistoryDeleted, &deleted)
		return deleted.Success
	}
	if !del() {
		t.Fatal("delete did not succeed")
	}
	if del() {
		t.Fatal("deleting it again succeeded")
	}
	r.turn("what was the word?")
	reqs := r.llm.Requests()
	last := reqs[len(reqs)-1]
	for _, m := range last.Messages {
		if strings.Contains(m.Content, "banana") {
			t.Fatalf("the deleted history reached the LLM: %+v", last.Messages)
		}
	}
}

func TestCloseStoresTheRunningTurn(t *testing.T) {
	var g *gate
	r := newRig(t, func(fakellm.Request) fakellm.Reply { return g.reply("Half", " of", " it.") })
	g = newGate(t)
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "go"})
	r.until(protocol.TypeToken, "")
	r.sess.Close()
	if got, want := aiRecords(r.records()), []string{"Half [interrupted]"}; !slices.Equal(got, want) {
		t.Fatalf("stored replies %q, want %q", got, want)
	}
}

func TestFailedLLMKeepsWhatWasSaid(t *testing.T) {
	r := newRig(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("It starts well and then"), BreakAfter: 3},
		fakellm.Reply{Tokens: fakellm.Words("Fine again.")},
	))
	r.dispatch(protocol.Inbound{Type: protocol.TypeTextInput, Text: "hi"})
	frames := r.until(protocol.TypeControl, protocol.ControlChainEnd)
	var errs []string
	for _, f := range frames {
		if f.Type == protocol.TypeError {
			errs = append(errs, f.Text)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "broke off") {
		t.Fatalf("error frames %q", errs)
	}
	r.turn("again")
	if got, want := aiRecords(r.records()), []string{"It starts well [interrupted]", "Fine again."}; !slices.Equal(got, want) {
		t.Fatalf("stored replies %q, want %q", got, want)
	}
}

func TestDispatchRefusals(t *testing.T) {
	r := newRig(t, fakellm.Echo(0))
	for _, tc := range []struct {
		in   protocol.Inbound
		kind koe.Kind
		want string
	}{
		{protocol.Inbound{Type: protocol.TypeTextInput, Text: "  "}, koe.Invalid, "empty input"},
		{protocol.Inbound{Type: "no-such-" + strings.Repeat("x", 5000)}, koe.Invalid, "unknown message type"},
		{protocol.Inbound{Type: protocol.TypeFetchAndSetHistory, HistoryUID: "../../etc"}, koe.Invalid, "not valid"},
		{protocol.Inbound{Type: protocol.TypeFetchAndSetHistory, HistoryUID: "2020-01-01_00-00-00_none"}, koe.NotFound, "no such history"},
		{protocol.Inbound{Type: protocol.TypeSwitchConfig, File: "../conf.yaml"}, koe.NotFound, "../conf.yaml"},
		{protocol.Inbound{Type: protocol.TypeSetCompressionRate}, koe.Invalid, "rate"},
		{protocol.Inbound{Type: protocol.TypeFetchContext}, koe.NotFound, "no LLM call"},
		{protocol.Inbound{Type: protocol.TypeMicAudioEnd}, koe.Invalid, "without any mic-audio-data"},
		{protocol.Inbound{Type: protocol.TypeRawAudioConfig, SampleRate: 5}, koe.Invalid, "sample_rate 5"},
	} {
		err := r.sess.Dispatch(tc.in)
		p := conversation.Explain(err)
		if err == nil || p.Kind != tc.kind || !strings.Contains(p.Message, tc.want) || len(p.Message) > 300 {
			t.Errorf("%.40s: %v → %+v, want kind %d containing %q", tc.in.Type, err, p, tc.kind, tc.want)
		}
	}
}

// The continuous stream's rate comes from raw-audio-config only.
func TestRawAudioRateOnlyFromConfig(t *testing.T) {
	r := newRig(t, fakellm.Echo(0))
	samples := make([]float64, 160)
	err := r.sess.Dispatch(protocol.Inbound{Type: protocol.TypeRawAudioData, Audio: samples, SampleRate: 44100})
	if p := conversation.Explain(err); p.Kind != koe.Invalid || !strings.Contains(p.Message, "raw-audio-config") {
		t.Fatalf("a rate on raw-audio-data: %v", err)
	}
	r.dispatch(protocol.Inbound{Type: protocol.TypeRawAudioConfig, SampleRate: 48000})
	r.dispatch(protocol.Inbound{Type: protocol.TypeRawAudioData, Audio: samples, SampleRate: 48000})
	r.dispatch(protocol.Inbound{Type: protocol.TypeRawAudioData, Audio: samples})
}

func TestInternalErrorsAreNotShown(t *testing.T) {
	err := errors.New("open /var/lib/koe/koe.db: permission denied")
	p := conversation.Explain(err)
	if p.Kind != koe.Internal || strings.Contains(p.Message, "/var/lib") {
		t.Fatalf("Explain(%v) = %+v", err, p)
	}
	if p := conversation.Explain(koe.ErrNotFound); p.Kind != koe.NotFound {
		t.Fatalf("not found → %+v", p)
	}
}
