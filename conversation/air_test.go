package conversation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/protocol"
)

func airTexts(t *testing.T, frames []airPiece) []string {
	t.Helper()
	var out []string
	for _, f := range frames {
		data, err := f.encoded()
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Text        string `json:"text"`
			DisplayText struct {
				Text string `json:"text"`
			} `json:"display_text"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Text+m.DisplayText.Text)
	}
	return out
}

// airSecond is a second of speech as an audio frame: 50 volumes of 20 ms.
func airSecond(text string) protocol.Audio {
	return protocol.Audio{Type: protocol.TypeAudio, Volumes: make([]float64, 50), SliceLength: 20,
		DisplayText: protocol.DisplayText{Text: text}}
}

// A joining watcher starts from the piece being played, by the time since
// the first piece went out; once they have all played, from the last.
func TestOnAirStartsFromThePieceBeingPlayed(t *testing.T) {
	ws := &Watchers{airBytes: DefaultOnAirBytes}
	s := &Session{clientUID: "c"}
	s.air.init("c", func() string { return "conf" }, false)
	say := func(msg any) uint64 {
		change, dur := airKind(msg)
		s.air.mu.Lock()
		defer s.air.mu.Unlock()
		seq, _ := ws.note(&s.air, t.Context(), "turn-1", nil, change, airPiece{msg: msg, dur: dur})
		return seq
	}
	var seqs []uint64
	for _, msg := range []any{protocol.Control(protocol.ControlChainStart), airSecond("one"), airSecond("two"), airSecond("three")} {
		seqs = append(seqs, say(msg))
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3, 4}) {
		t.Errorf("the turn's frames are numbered %v", seqs)
	}
	first := s.air.first
	for _, tc := range []struct {
		after time.Duration
		want  []string
	}{
		{0, []string{protocol.ControlChainStart, "one", "two", "three"}},
		{1500 * time.Millisecond, []string{protocol.ControlChainStart, "two", "three"}},
		{2999 * time.Millisecond, []string{protocol.ControlChainStart, "three"}},
		{time.Minute, []string{protocol.ControlChainStart, "three"}},
	} {
		if got := airTexts(t, s.air.state(first.Add(tc.after))); !slices.Equal(got, tc.want) {
			t.Errorf("%v after the first piece: %q, want %q", tc.after, got, tc.want)
		}
	}
	if len(ws.onAirFor(protocol.WatchTarget{ConfUID: "conf"}, true)) != 1 {
		t.Error("the reply is not listed on air")
	}
	say(protocol.Control(protocol.ControlInterrupt))
	if got := s.air.state(first); got != nil || len(ws.onAirFor(protocol.WatchTarget{ClientUID: "c"}, false)) != 0 {
		t.Errorf("after an interrupt: %q on air", airTexts(t, got))
	}
	// A late frame of a closed session does not put it back on air.
	ws.offAir(s)
	say(protocol.Control(protocol.ControlChainStart))
	if len(ws.onAirFor(protocol.WatchTarget{ClientUID: "c"}, false)) != 0 {
		t.Error("a closed session went back on air")
	}
}

// The mirror of another instance's speaker knows a frame it had by its
// turn and number, whichever came first: the frames relayed as they went
// out, or the state sent to this instance when it began to follow.
func TestMirrorKnowsCopies(t *testing.T) {
	ws := &Watchers{airBytes: DefaultOnAirBytes}
	relayed := func(turn string, seq uint64, msg any) bool {
		data, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		change, dur := airKindOf(data)
		a := ws.mirrorOf("speaker", "conf")
		a.mu.Lock()
		defer a.mu.Unlock()
		_, dup := ws.note(a, t.Context(), turn, nil, change, airPiece{data: data, seq: seq, dur: dur})
		return dup
	}
	start := protocol.Control(protocol.ControlChainStart)
	// Pieces 3 and 4 come before the state (1: the start, 2, 3: pieces).
	for _, tc := range []struct {
		seq  uint64
		msg  any
		copy bool
	}{
		{3, airSecond("two"), false},
		{4, airSecond("three"), false},
		{1, start, true},
		{2, airSecond("one"), true},
		{3, airSecond("two"), true},
	} {
		if dup := relayed("turn-1", tc.seq, tc.msg); dup != tc.copy {
			t.Errorf("frame %d: a copy %v, want %v", tc.seq, dup, tc.copy)
		}
	}
	// Its start missed, that turn is not on air here; the next is.
	if len(ws.onAirFor(protocol.WatchTarget{ConfUID: "conf"}, false)) != 0 {
		t.Error("a turn whose start was missed is on air")
	}
	relayed("turn-2", 1, start)
	relayed("turn-2", 2, airSecond("hello"))
	if dup := relayed("turn-2", 2, airSecond("hello")); !dup {
		t.Error("a piece relayed twice is no copy")
	}
	got := ws.onAirFor(protocol.WatchTarget{ConfUID: "conf"}, false)
	if len(got) != 1 || len(ws.onAirFor(protocol.WatchTarget{ConfUID: "conf"}, true)) != 0 {
		t.Fatalf("the mirrored reply on air: %d (and %d of this instance)", len(got), len(ws.onAirFor(protocol.WatchTarget{ConfUID: "conf"}, true)))
	}
	got[0].mu.Lock()
	texts := airTexts(t, got[0].state(time.Now()))
	got[0].mu.Unlock()
	if want := []string{protocol.ControlChainStart, "hello"}; !slices.Equal(texts, want) {
		t.Errorf("the mirror's state: %q, want %q", texts, want)
	}
}

// What a reply keeps on air for watchers that join is bounded
// (conversation.on_air_bytes): the pieces that have played go, and a
// reply whose pieces to come outgrow the bound keeps none.
func TestOnAirIsBounded(t *testing.T) {
	// A minute of speech each: the test takes no time next to that.
	audio := func(text string, n int) protocol.Audio {
		a := airSecond(text)
		a.Volumes = make([]float64, 60*50)
		b64 := strings.Repeat("A", n)
		a.Audio = &b64
		return a
	}
	ws := &Watchers{airBytes: 1000}
	s := &Session{clientUID: "c"}
	s.air.init("c", func() string { return "conf" }, false)
	say := func(msg any) {
		change, dur := airKind(msg)
		s.air.mu.Lock()
		defer s.air.mu.Unlock()
		ws.note(&s.air, t.Context(), "turn-1", nil, change, airPiece{msg: msg, dur: dur})
	}
	say(protocol.Control(protocol.ControlChainStart))
	say(audio("one", 400))
	say(audio("two", 400))
	// "one" has played, "two" is playing: "one" goes as "three" comes.
	s.air.mu.Lock()
	s.air.first = s.air.first.Add(-90 * time.Second)
	s.air.mu.Unlock()
	say(audio("three", 400))
	s.air.mu.Lock()
	got, bytes := airTexts(t, s.air.state(time.Now())), s.air.bytes
	s.air.mu.Unlock()
	if want := []string{protocol.ControlChainStart, "two", "three"}; !slices.Equal(got, want) || bytes != 2*(400+3)+2 {
		t.Errorf("on air: %q (%d bytes), want %q", got, bytes, want)
	}
	// Two more seconds to come would pass the bound: nothing is kept.
	say(audio("four", 400))
	s.air.mu.Lock()
	got, bytes = airTexts(t, s.air.state(time.Now())), s.air.bytes
	s.air.mu.Unlock()
	if want := []string{protocol.ControlChainStart}; !slices.Equal(got, want) || bytes != 0 {
		t.Errorf("past the bound: %q (%d bytes), want %q", got, bytes, want)
	}
	say(audio("five", 10))
	s.air.mu.Lock()
	got = airTexts(t, s.air.state(time.Now()))
	s.air.mu.Unlock()
	if want := []string{protocol.ControlChainStart}; !slices.Equal(got, want) {
		t.Errorf("after the bound was passed: %q, want %q", got, want)
	}
}
