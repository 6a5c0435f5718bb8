package agent

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
)

// answeringEmitter puts every question and answers it yes at once.
type answeringEmitter struct{ asked atomic.Int32 }

func (e *answeringEmitter) Token(string)                         {}
func (e *answeringEmitter) ToolsCalled([]ToolCall)               {}
func (e *answeringEmitter) ToolStarted(ToolCall)                 {}
func (e *answeringEmitter) ToolFinished(ToolCall, string, error) {}
func (e *answeringEmitter) Ask(Question) (<-chan Answer, func(Answer)) {
	e.asked.Add(1)
	answers := make(chan Answer, 1)
	answers <- Answer{Action: Accept}
	return answers, func(Answer) {}
}

// A call may put tools.max_questions questions; the next are declined
// without being put, so a server asking again and again cannot hold a
// turn open. Each call counts its own.
func TestQuestionsPerCallBounded(t *testing.T) {
	a := New(Options{MaxQuestions: 2})
	ca := a.newCycleAsker()
	em := &answeringEmitter{}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // Reply's goroutine, which puts the questions
		for {
			select {
			case r := <-ca.reqs:
				ca.put(em, r)
			case <-stop:
				return
			}
		}
	}()
	ask := func(id string) Answer {
		return ca.Ask(context.Background(), Question{Kind: AskConfirm, Call: ToolCall{ID: id, Name: "srv__ask"}})
	}
	for i, want := range []string{Accept, Accept, Decline} {
		if got := ask("call_1"); got.Action != want {
			t.Fatalf("question %d: %s (%s), want %s", i+1, got.Action, got.Reason, want)
		} else if want == Decline && !strings.Contains(got.Reason, "tools.max_questions") {
			t.Fatalf("the declined question's reason: %q", got.Reason)
		}
	}
	if got := ask("call_2"); got.Action != Accept {
		t.Fatalf("another call's first question: %s (%s)", got.Action, got.Reason)
	}
	if n := em.asked.Load(); n != 3 {
		t.Fatalf("%d questions put to the user, want 3", n)
	}
}
