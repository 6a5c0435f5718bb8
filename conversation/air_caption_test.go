package conversation

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"koe/protocol"
)

// A watcher that joins while a later part of a streamed sentence plays
// gets that part with its sentence's display text; the parts after it
// stay as sent. Relayed frames (a mirror's) are treated alike.
func TestOnAirLaterPartGetsItsSentence(t *testing.T) {
	part := func(text string) protocol.Audio {
		m := airSecond(text)
		if text == "" {
			m.DisplayText = protocol.DisplayText{}
		}
		return m
	}
	frames := []any{protocol.Control(protocol.ControlChainStart), part("one"), part(""), part(""), part("two"), part("")}
	for _, relayed := range []bool{false, true} {
		ws := &Watchers{airBytes: DefaultOnAirBytes}
		s := &Session{clientUID: "c"}
		s.air.init("c", func() string { return "conf" }, false)
		for i, msg := range frames {
			change, dur := airKind(msg)
			p := airPiece{msg: msg, dur: dur}
			if relayed {
				data, err := json.Marshal(msg)
				if err != nil {
					t.Fatal(err)
				}
				p = airPiece{data: data, dur: dur, seq: uint64(i + 1)}
			}
			s.air.mu.Lock()
			ws.note(&s.air, t.Context(), "turn-1", nil, change, p)
			s.air.mu.Unlock()
		}
		first := s.air.first
		for _, tc := range []struct {
			after time.Duration
			want  []string
		}{
			{500 * time.Millisecond, []string{protocol.ControlChainStart, "one", "", "", "two", ""}},
			{1500 * time.Millisecond, []string{protocol.ControlChainStart, "one", "", "two", ""}},
			{2500 * time.Millisecond, []string{protocol.ControlChainStart, "one", "two", ""}},
			{4500 * time.Millisecond, []string{protocol.ControlChainStart, "two"}},
		} {
			if got := airTexts(t, s.air.state(first.Add(tc.after))); !slices.Equal(got, tc.want) {
				t.Errorf("relayed %v, %v after the first piece: %q, want %q", relayed, tc.after, got, tc.want)
			}
		}
	}
}
