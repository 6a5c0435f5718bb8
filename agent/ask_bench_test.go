package agent

import (
	"context"
	"log/slog"
	"testing"
)

// yesEmitter answers every question at once, as a click would.
type yesEmitter struct{ answer Answer }

func (yesEmitter) Token(string)                         {}
func (yesEmitter) ToolsCalled([]ToolCall)               {}
func (yesEmitter) ToolStarted(ToolCall)                 {}
func (yesEmitter) ToolFinished(ToolCall, string, error) {}
func (e yesEmitter) Ask(Question) (<-chan Answer, func(Answer)) {
	ch := make(chan Answer, 1)
	ch <- e.answer
	return ch, func(Answer) {}
}

// oneTool is a toolbox of one tool that changes things.
type oneTool struct{ calls int }

func (o *oneTool) Specs() []ToolSpec { return []ToolSpec{{Name: "srv__delete", Changes: true}} }
func (o *oneTool) Call(context.Context, ToolCall) (string, error) {
	o.calls++
	return "deleted", nil
}

// What koe adds to a call that waits for the user's yes, the user's time
// aside: the question handed to Reply's goroutine, put, answered, read by
// rules, and the call run.
func BenchmarkConfirmedCall(b *testing.B) {
	box := &oneTool{}
	a := New(Options{Tools: Guard(box, ToolPolicy{}), Logger: slog.New(slog.DiscardHandler)})
	calls := []ToolCall{{ID: "c", Name: "srv__delete", Arguments: `{}`}}
	em := yesEmitter{answer: Answer{Text: "Yes, go ahead."}}
	b.ReportAllocs()
	for b.Loop() {
		if r := a.runTools(context.Background(), calls, em, nil); r[0].text != "deleted" {
			b.Fatal(r[0].text)
		}
	}
	if box.calls == 0 {
		b.Fatal("the tool never ran")
	}
}

// The same call with the tool allowed: no question.
func BenchmarkAllowedCall(b *testing.B) {
	box := &oneTool{}
	a := New(Options{Tools: Guard(box, ToolPolicy{Allow: []string{"srv__*"}}), Logger: slog.New(slog.DiscardHandler)})
	calls := []ToolCall{{ID: "c", Name: "srv__delete", Arguments: `{}`}}
	b.ReportAllocs()
	for b.Loop() {
		if r := a.runTools(context.Background(), calls, yesEmitter{}, nil); r[0].text != "deleted" {
			b.Fatal(r[0].text)
		}
	}
}
