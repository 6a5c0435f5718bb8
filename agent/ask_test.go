package agent

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestConfirmWords(t *testing.T) {
	for text, want := range map[string]string{
		"Yes.": Accept, "yeah go ahead": Accept, "OK": Accept, "Sure, do it!": Accept,
		"No.": Decline, "no thanks": Decline, "Never mind.": Decline, "don't": Decline,
		"Cancel": Cancel, "stop!": Cancel, "forget it": Cancel,
		// Anything that is not a clear yes keeps the tool from running.
		"what's the weather": Decline, "": Decline, "yesterday": Decline, "nobody": Decline,
	} {
		if got := confirmAction(text); got != want {
			t.Errorf("%q: %s, want %s", text, got, want)
		}
	}
}

const colorSchema = `{"type":"object","properties":{"color":{"type":"string","title":"Color","enum":["red","green","blue"]}},"required":["color"]}`

const formSchema2 = `{"type":"object","properties":{
	"name":{"type":"string","title":"Full name"},
	"age":{"type":"integer","minimum":0,"maximum":150},
	"agree":{"type":"boolean"},
	"hero":{"type":"string","oneOf":[{"const":"hero-1","title":"Superman"},{"const":"hero-2","title":"Wonder Woman"}]},
	"tools":{"type":"array","items":{"type":"string","enum":["Guitar","Piano","Drums"]}}},
	"required":["name"]}`

func TestElicitedAnswersByRules(t *testing.T) {
	a := New(Options{})
	for _, tc := range []struct {
		schema, text, action string
		content              map[string]any
	}{
		{colorSchema, "Blue, please.", Accept, map[string]any{"color": "blue"}},
		{colorSchema, "GREEN", Accept, map[string]any{"color": "green"}},
		{colorSchema, "red or blue", Decline, nil}, // two options: not an answer
		{colorSchema, "never mind", Decline, nil},
		{colorSchema, "cancel", Cancel, nil},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":10}},"required":["n"]}`, "seven", Accept, map[string]any{"n": int64(7)}},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":10}},"required":["n"]}`, "42", Decline, nil},
		{`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`, "no", Accept, map[string]any{"ok": false}},
		{`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`, "never mind", Decline, nil},
		{`{"type":"object","properties":{}}`, "sure", Accept, map[string]any{}},
		{formSchema2, "full name: Ada Lovelace, age is 36; agree = yes and hero: Wonder Woman, tools: piano and drums", Accept,
			map[string]any{"name": "Ada Lovelace", "age": int64(36), "agree": true, "hero": "hero-2", "tools": []any{"Piano"}}},
	} {
		q := Question{Kind: AskElicit, Schema: json.RawMessage(tc.schema)}
		got := a.readElicited(context.Background(), q, tc.text)
		if got.Action != tc.action || tc.content != nil && !reflect.DeepEqual(got.Content, tc.content) {
			t.Errorf("%q: %s %v (%s), want %s %v", tc.text, got.Action, got.Content, got.Reason, tc.action, tc.content)
		}
	}
}

// jsonLLM answers every request with text, and counts them.
type jsonLLM struct {
	text  string
	calls int
	req   Request
}

func (l *jsonLLM) Stream(context.Context, Request, func(string)) (StreamResult, error) {
	return StreamResult{}, errors.New("not streamed")
}

func (l *jsonLLM) Complete(_ context.Context, r Request) (string, *Usage, error) {
	l.calls++
	l.req = r
	return l.text, nil, nil
}

// Words that name no field are read by one structured call, and what it
// reads is checked against the schema like the rules' reading.
func TestElicitedAnswerReadByTheModel(t *testing.T) {
	llm := &jsonLLM{text: "```json\n{\"name\":\"Grace Hopper\",\"age\":\"eighty\",\"agree\":true}\n```"}
	a := New(Options{LLM: llm})
	got := a.readElicited(context.Background(), Question{Kind: AskElicit, Text: "Who are you?", Schema: json.RawMessage(formSchema2)}, "I'm Grace Hopper and I agree")
	want := map[string]any{"name": "Grace Hopper", "agree": true}
	if got.Action != Accept || !reflect.DeepEqual(got.Content, want) || llm.calls != 1 {
		t.Fatalf("%s %v after %d calls, want accept %v after 1", got.Action, got.Content, llm.calls, want)
	}
	if llm.req.JSONSchema == nil || !strings.Contains(llm.req.Messages[1].Content, "Who are you?") {
		t.Fatalf("the request: %+v", llm.req)
	}

	llm = &jsonLLM{text: `{"age":40}`}
	a = New(Options{LLM: llm})
	if got := a.readElicited(context.Background(), Question{Kind: AskElicit, Schema: json.RawMessage(formSchema2)}, "mumble"); got.Action != Decline || !strings.Contains(got.Reason, "Full name") {
		t.Fatalf("a reading without the required field: %s %v %q", got.Action, got.Content, got.Reason)
	}
}

// The question names what is asked, and a single choice's options.
func TestElicitQuestionText(t *testing.T) {
	text, _, opts, err := ElicitQuestion("Which color?", json.RawMessage(colorSchema))
	if err != nil || text != "Which color? (Color (red, green, blue))" || !reflect.DeepEqual(opts, []string{"red", "green", "blue"}) {
		t.Fatalf("%q %q %v", text, opts, err)
	}
	text, _, _, _ = ElicitQuestion("Your name?", json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`))
	if text != "Your name?" {
		t.Fatalf("%q", text)
	}
}

// A call's clock stops while the user is asked: a call that waits for
// an answer longer than its limit is not timed out for it, and a call
// that runs past its limit still is.
func TestCallClockStopsWhileAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := WithCallTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		began := time.Now()
		resume := stopClocks(ctx)
		// The user takes longer to answer than the call may run.
		time.Sleep(120 * time.Millisecond)
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatal("the call timed out while the user was being asked")
		}
		resume()
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("the call ended with %v, want its time limit", ctx.Err())
		}
		if took := time.Since(began); took != 170*time.Millisecond {
			t.Fatalf("the call ran %s in all; want 120ms asking plus its 50ms", took)
		}
		// A context made from it ends with it (the MCP call's own).
		inner, stop := context.WithTimeout(ctx, time.Hour)
		defer stop()
		if inner.Err() == nil {
			t.Fatal("a context made from the call outlived it")
		}
	})
}
