package agent_test

import (
	"fmt"
	"reflect"
	"testing"

	"koe/agent"
)

// splitHistory is a history of n turns as memory holds it: the system
// prompt, then each turn's question, a tool call and its result, and the
// answer; the last turn is still waiting for its answer.
func splitHistory(n int) []agent.Message {
	msgs := []agent.Message{{Role: agent.RoleSystem, Content: "You are Koe."}}
	for i := range n {
		msgs = append(msgs, agent.Message{Role: agent.RoleUser, Content: fmt.Sprintf("question %d", i)})
		if i == n-1 {
			break
		}
		msgs = append(msgs,
			agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c", Name: "clock"}}},
			agent.Message{Role: agent.RoleTool, ToolCallID: "c", Content: "noon"},
			agent.Message{Role: agent.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
	}
	return msgs
}

// Turns are split as they were, each turn's messages in order, and a turn
// that grows (as the current one does, in the context's building) leaves
// the next one's messages alone, though all share one array.
func TestSplitTurnsSharesNothingAcrossTurns(t *testing.T) {
	msgs := splitHistory(4)
	turns := agent.SplitTurns(msgs)
	if len(turns) != 4 {
		t.Fatalf("%d turns, want 4", len(turns))
	}
	for i, tr := range turns {
		want := msgs[1+4*i : min(len(msgs), 1+4*(i+1))]
		if tr.Index != i+1 || !reflect.DeepEqual(tr.Messages, want) {
			t.Fatalf("turn %d = %d %+v, want %+v", i, tr.Index, tr.Messages, want)
		}
	}
	next := turns[1].Messages[0]
	_ = append(turns[0].Messages, agent.Message{Role: agent.RoleUser, Content: "written over"})
	if !reflect.DeepEqual(turns[1].Messages[0], next) {
		t.Fatalf("appending to turn 1 changed turn 2: %+v", turns[1].Messages[0])
	}
	if got := agent.SplitTurns([]agent.Message{{Role: agent.RoleSystem, Content: "x"}}); got != nil {
		t.Fatalf("no user message gave %+v, want no turns", got)
	}
}

// BenchmarkSplitTurns splits a 50-turn history, as every request of a long
// conversation does.
//
//	go test ./agent -run '^$' -bench SplitTurns -benchmem
func BenchmarkSplitTurns(b *testing.B) {
	msgs := splitHistory(50)
	b.ReportAllocs()
	for b.Loop() {
		agent.SplitTurns(msgs)
	}
}
