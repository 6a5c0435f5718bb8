package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A turn can put a question to its user while tools run: a confirmation
// before a tool that changes things, or a question an MCP server asks
// (elicitation). The character says it aloud and in text, and the
// user's next words (typed, spoken, or a click on koe's page) answer it.
// Answers come only from the user's client: nothing the model writes and
// nothing a server sends can reach the channel an answer arrives on.

// Kinds of Question.
const (
	AskConfirm = "confirm" // may a tool run? yes or no
	AskElicit  = "elicit"  // a server's question, answered against its schema
)

// Actions of an Answer, in MCP's words.
const (
	Accept  = "accept"
	Decline = "decline"
	Cancel  = "cancel"
)

// DefaultAskTimeout is how long a question waits for the user unless
// tools.ask_timeout says otherwise.
const DefaultAskTimeout = 90 * time.Second

// DefaultMaxQuestions is how many questions one tool call may put to the
// user unless tools.max_questions says otherwise.
const DefaultMaxQuestions = 3

// Question is what a turn asks its user.
type Question struct {
	// ID names the question for clients (a click answers it by ID).
	ID   string
	Kind string
	// Text is shown; Speech is said (no JSON read aloud).
	Text, Speech string
	// Call is the tool call the question is about: the call to confirm,
	// or the call under way when a server asks.
	Call ToolCall
	// Source names who asks, for people ("MCP server files").
	Source string
	// Schema is the requested schema of an elicitation (a flat object).
	Schema json.RawMessage
	// Options are the choices a client may offer as buttons (an enum).
	Options []string
}

// Answer is how a question ended.
type Answer struct {
	Action string
	// Text is the user's words, as typed or transcribed; "" for a click.
	Text string
	// Content holds an accepted elicitation's values.
	Content map[string]any
	// Reason says why koe answered for the user (a timeout, nobody to
	// ask, words it could not read), for logs and the model.
	Reason string
	// Unasked: nobody could be asked, so nobody was.
	Unasked bool
}

// AskEmitter is an emitter that can put a question to the turn's user.
// Ask is called on Reply's goroutine: it shows and speaks q in the
// reply's order and returns the channel on which the user's answer
// arrives (nil: nobody can answer in this session), and done, which the
// agent calls exactly once with how the question ended, so that clients
// stop offering it.
type AskEmitter interface {
	Emitter
	Ask(q Question) (answers <-chan Answer, done func(Answer))
}

// Asker asks the user of the turn something on a tool call's behalf.
type Asker interface {
	Ask(ctx context.Context, q Question) Answer
}

type askerKey struct{}

// AskerFrom returns the asker of a tool call's context, or nil when the
// call runs where nobody can be asked.
func AskerFrom(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}

// WithAsker returns ctx carrying a.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

// askRequest is a question handed to Reply's goroutine to be put.
type askRequest struct {
	q     Question
	reply chan asked
}

type asked struct {
	answers <-chan Answer
	done    func(Answer)
}

// cycleAsker is the Asker of one cycle's tool calls: questions are put
// one at a time, by Reply's goroutine (which owns the emitter), while
// runTools waits for the calls.
type cycleAsker struct {
	a     *Agent
	reqs  chan askRequest
	ended chan struct{} // the cycle's calls are over: nobody puts questions
	one   chan struct{} // one question at a time

	mu    sync.Mutex
	asked map[string]int // questions put, by call id
}

func (a *Agent) newCycleAsker() *cycleAsker {
	return &cycleAsker{a: a, reqs: make(chan askRequest), ended: make(chan struct{}), one: make(chan struct{}, 1), asked: map[string]int{}}
}

// put runs on Reply's goroutine.
func (ca *cycleAsker) put(watcher ToolEmitter, r askRequest) {
	var out asked
	if e, ok := watcher.(AskEmitter); ok {
		out.answers, out.done = e.Ask(r.q)
	}
	r.reply <- out
}

// Ask puts q to the user and waits for the answer, with the calls'
// clocks stopped. It never fails: a question that cannot be put, or is
// not answered within tools.ask_timeout, is declined; one whose call or
// turn ends first (an interrupt) is cancelled.
func (ca *cycleAsker) Ask(ctx context.Context, q Question) Answer {
	if !ca.count(q.Call.ID) {
		ca.a.log.Warn("a tool call asked the user more often than tools.max_questions allows; declined", "tool", q.Call.Name, "max_questions", ca.a.opts.MaxQuestions)
		return Answer{Action: Decline, Reason: fmt.Sprintf("this call has asked %d questions, the most tools.max_questions allows", ca.a.opts.MaxQuestions)}
	}
	select {
	case ca.one <- struct{}{}:
		defer func() { <-ca.one }()
	case <-ctx.Done():
		return Answer{Action: Cancel, Reason: "the call ended before its question was put"}
	case <-ca.ended:
		return Answer{Action: Decline, Reason: "the tool calls are over"}
	}
	defer stopClocks(ctx)()
	if q.ID == "" {
		q.ID = newAskID()
	}
	r := askRequest{q: q, reply: make(chan asked, 1)}
	select {
	case ca.reqs <- r:
	case <-ctx.Done():
		return Answer{Action: Cancel, Reason: "the call ended before its question was put"}
	case <-ca.ended:
		return Answer{Action: Decline, Reason: "the tool calls are over"}
	}
	out := <-r.reply
	if out.answers == nil {
		return Answer{Action: Decline, Unasked: true, Reason: "this conversation has no user to ask (a chat API or live chat turn)"}
	}
	ans := ca.wait(ctx, q, out.answers)
	out.done(ans)
	ca.a.log.Info("the user was asked", "kind", q.Kind, "tool", q.Call.Name, "action", ans.Action, "reason", ans.Reason)
	return ans
}

// count notes one more question of the call id, and reports whether it
// is within tools.max_questions.
func (ca *cycleAsker) count(id string) bool {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if ca.asked[id] >= ca.a.opts.MaxQuestions {
		return false
	}
	ca.asked[id]++
	return true
}

// wait waits for an answer and reads it.
func (ca *cycleAsker) wait(ctx context.Context, q Question, answers <-chan Answer) Answer {
	timeout := ca.a.opts.AskTimeout
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case ans := <-answers:
		return ca.a.readAnswer(ctx, q, ans)
	case <-timer.C:
		return Answer{Action: Decline, Reason: fmt.Sprintf("no answer within %s (tools.ask_timeout)", timeout)}
	case <-ctx.Done():
		return Answer{Action: Cancel, Reason: "the turn was stopped while the question waited"}
	}
}

// readAnswer turns the user's words into an answer to q; a click comes
// with its action already.
func (a *Agent) readAnswer(ctx context.Context, q Question, ans Answer) Answer {
	if ans.Action != "" && ans.Text == "" {
		if ans.Action == Accept && q.Kind == AskElicit {
			// A click that gives no values answers a form that asks
			// for none it requires, and declines one that does.
			f, err := parseForm(q.Schema)
			if err != nil {
				return Answer{Action: Decline, Reason: err.Error()}
			}
			content, missing := f.check(nil)
			if len(missing) > 0 {
				return Answer{Action: Decline, Reason: "accepted without " + strings.Join(missing, ", ")}
			}
			ans.Content = content
		}
		return ans
	}
	if q.Kind == AskConfirm {
		return Answer{Action: confirmAction(ans.Text), Text: ans.Text}
	}
	return a.readElicited(ctx, q, ans.Text)
}

func newAskID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "ask_" + hex.EncodeToString(b)
}

// ErrNotConfirmed is a tool call the user did not allow.
var ErrNotConfirmed = errors.New("the user did not allow this tool call")

// AskTimeout is how long a question waits for the user's answer.
func (a *Agent) AskTimeout() time.Duration { return a.opts.AskTimeout }
