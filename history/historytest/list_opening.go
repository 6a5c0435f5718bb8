package historytest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"koe"
)

// A listing names each history's opening: the first human message among
// its first koe.OpeningRecords records, cut to koe.OpeningRunes runes,
// whatever came before it (a greeting, a tool step) and however the
// history goes on.
func testListOpening(t *testing.T, be Backend) {
	ctx := t.Context()
	s := be.Open(t, StepClock(T0))
	long := strings.Repeat("ü", koe.OpeningRunes) + " and more"
	greeted := MustCreate(t, s, "c")
	MustAppend(t, s, "c", greeted, koe.Record{Role: koe.RoleAI, Content: "Welcome back!", Name: "Mao"})
	MustAppend(t, s, "c", greeted, koe.Record{Role: koe.RoleToolCall, Content: "", ToolCalls: []koe.ToolCall{{ID: "c1", Name: "clock", Arguments: "{}"}}})
	MustAppend(t, s, "c", greeted, koe.Record{Role: koe.RoleTool, Content: "noon", Name: "clock", ToolCallID: "c1"})
	MustAppend(t, s, "c", greeted, koe.Record{Role: koe.RoleHuman, Content: long})
	MustAppend(t, s, "c", greeted, koe.Record{Role: koe.RoleHuman, Content: "the second thing I said"})
	// A human message further in than the listing looks: no opening.
	late := MustCreate(t, s, "c")
	for i := 2; i <= koe.OpeningRecords; i++ {
		MustAppend(t, s, "c", late, koe.Record{Role: koe.RoleAI, Content: fmt.Sprintf("monologue %d", i)})
	}
	MustAppend(t, s, "c", late, koe.Record{Role: koe.RoleHuman, Content: "too late to title it"})
	// A human message holding NUL and escapes is listed as it was said.
	odd := MustCreate(t, s, "c")
	MustAppend(t, s, "c", odd, koe.Record{Role: koe.RoleHuman, Content: "nul\x00 \"quoted\" \\ end"})

	got, err := s.List(ctx, "c")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	openings := map[string]string{}
	for _, h := range got {
		openings[h.UID] = h.Opening
	}
	want := map[string]string{greeted: strings.Repeat("ü", koe.OpeningRunes), late: "", odd: "nul\x00 \"quoted\" \\ end"}
	if len(openings) != len(want) {
		t.Fatalf("List = %+v, want %d histories", got, len(want))
	}
	for uid, w := range want {
		if openings[uid] != w {
			t.Errorf("history %s: opening %q, want %q", uid, openings[uid], w)
		}
	}
}

// BenchList lists a character's 1,000 histories of 50 messages each, as
// a page does after every turn: the cost is per history, not per message.
func BenchList(b *testing.B, be Backend) {
	ctx := b.Context()
	s := be.Open(b, nil)
	const histories, messages = 1000, 50
	records := benchConversation(messages)
	start := time.Now()
	for i := range histories {
		uid := koe.NewHistoryUID(start.Add(time.Duration(i) * time.Second))
		if err := s.CreateWith(ctx, "bench", uid, records...); err != nil {
			b.Fatal(err)
		}
	}
	timed(b, func() error {
		list, err := s.List(ctx, "bench")
		if err == nil && (len(list) != histories || list[0].Opening == "") {
			err = fmt.Errorf("%d histories, want %d with openings", len(list), histories)
		}
		return err
	})
}
