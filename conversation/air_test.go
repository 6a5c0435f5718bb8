package conversation

import (
	"slices"
	"testing"
	"time"

	"koe/protocol"
)

// A joining watcher starts from the piece being played, by the time since
// the first piece went out; once they have all played, from the last.
func TestOnAirStartsFromThePieceBeingPlayed(t *testing.T) {
	start := protocol.Control(protocol.ControlChainStart)
	piece := func(text string) protocol.Audio {
		// 50 volumes of 20 ms: a second of speech.
		return protocol.Audio{Type: protocol.TypeAudio, Volumes: make([]float64, 50), SliceLength: 20,
			DisplayText: protocol.DisplayText{Text: text}}
	}
	ws := &Watchers{}
	s := &Session{clientUID: "c"}
	ws.note(s, t.Context(), start)
	for _, text := range []string{"one", "two", "three"} {
		ws.note(s, t.Context(), piece(text))
	}
	texts := func(frames []any) []string {
		var out []string
		for _, f := range frames {
			switch m := f.(type) {
			case protocol.Audio:
				out = append(out, m.DisplayText.Text)
			case protocol.Text:
				out = append(out, m.Text)
			}
		}
		return out
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
		if _, frames := s.air.state(first.Add(tc.after)); !slices.Equal(texts(frames), tc.want) {
			t.Errorf("%v after the first piece: %q, want %q", tc.after, texts(frames), tc.want)
		}
	}
	if len(ws.onAirFor(protocol.WatchTarget{ClientUID: "c"})) != 1 {
		t.Error("the session is not listed on air")
	}
	ws.note(s, t.Context(), protocol.Control(protocol.ControlInterrupt))
	if _, frames := s.air.state(first); frames != nil || len(ws.onAirFor(protocol.WatchTarget{ClientUID: "c"})) != 0 {
		t.Errorf("after an interrupt: %q on air", texts(frames))
	}
	// A late frame of a closed session does not put it back on air.
	ws.offAir(s)
	ws.note(s, t.Context(), start)
	if len(ws.onAirFor(protocol.WatchTarget{ClientUID: "c"})) != 0 {
		t.Error("a closed session went back on air")
	}
}
