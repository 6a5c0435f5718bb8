package chatcli

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/config"
	"koe/testkit/fakellm"
)

func toolScript() func(fakellm.Request) fakellm.Reply {
	return fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("Let me check."), ToolCalls: []fakellm.ToolCall{
			{ID: "call_1", Name: "calculator", Arguments: `{"expression": "6 * 7"}`},
		}},
		fakellm.Reply{Tokens: fakellm.Words("It is 42.")},
	)
}

func withCalculator(cfg *config.Config) { cfg.Character.Tools.Enabled = []string{"calculator"} }

// holdable lets a test's LLM hold its first token as long as the test
// needs: koe would otherwise give up on it after llm.idle_timeout.
func holdable(cfg *config.Config) { cfg.Character.LLM.IdleTimeout = 2 * hangGuard }

// spinning matches a spinner frame of the LLM's task.
var spinning = regexp.MustCompile("[" + strings.Join(spinnerFrames, "") + "] thinking")

// Without a terminal the chat is a plain transcript: the answer as it
// streamed, the tool call with its input and output, no animation.
func TestTranscriptOfAToolTurn(t *testing.T) {
	base, _ := startKoe(t, toolScript(), withCalculator)
	s := startChat(t, base, Settings{}, false)
	s.waitFor(userPrompt)
	s.send("What is six times seven?")
	got := s.waitFor("It is 42.\n" + userPrompt)
	want := `What is six times seven?
koe> Let me check.
⋯ calculator {"expression":"6 * 7"}
✓ calculator {"expression":"6 * 7"}
  ↳ 42
koe> It is 42.
you> `
	if got != want {
		t.Errorf("transcript:\n%s\nwant:\n%s", got, want)
	}
	if strings.ContainsAny(s.out.String(), "\r\x1b") {
		t.Errorf("control characters in a transcript: %q", s.out.String())
	}
	s.send("/quit")
	if err := s.ended(); err != nil {
		t.Errorf("/quit: %v", err)
	}
}

// On a terminal a running task is a spinner on a line of its own, erased
// when the task ends or the answer starts.
func TestSpinnerOnATerminal(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	base, _ := startKoe(t, func(r fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words("Hello there."), BeforeChunk: func(i int) {
			if i == 0 {
				<-release
			}
		}}
	}, holdable)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the LLM closes
	s := startChat(t, base, Settings{}, true)
	s.waitFor(userPrompt)
	s.send("Hi!")
	// The LLM holds its first token: the spinner turns.
	frame := func() string {
		drawn := s.waitFor(" thinking")
		if !spinning.MatchString(drawn) {
			t.Fatalf("%q is no spinner", drawn)
		}
		return spinning.FindAllString(drawn, -1)[0]
	}
	for first := frame(); frame() == first; {
	}
	releaseOnce.Do(func() { close(release) })
	got := s.waitFor("Hello there.\n" + userPrompt)
	if !strings.Contains(got, "\r\x1b[Kkoe> Hello") {
		t.Errorf("the answer does not replace the spinner's line: %q", got)
	}
}

// Ctrl-C during a turn asks koe to stop it, and the turn ends marked
// interrupted; the chat goes on.
func TestCtrlCStopsTheTurn(t *testing.T) {
	base, llm := startKoe(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("la la la "), Endless: true, Interval: 2 * time.Millisecond},
		fakellm.Reply{Tokens: fakellm.Words("Fine.")},
	))
	rec := &recorder{}
	s := startChat(t, startRecorder(t, base, rec), Settings{}, false)
	s.waitFor(userPrompt)
	s.send("Sing.")
	s.waitFor("koe> la")
	s.interrupt()
	s.waitFor(markInterrupted + " interrupted\n" + userPrompt)
	select {
	case <-llm.Disconnects():
	case <-time.After(hangGuard):
		t.Fatal("koe did not stop the LLM")
	}
	stops := 0
	for _, r := range rec.Requests() {
		if strings.HasSuffix(r, "/stop") {
			stops++
		}
	}
	if stops != 1 {
		t.Errorf("requests %q, want one stop", rec.Requests())
	}
	s.send("Something else.")
	s.waitFor("koe> Fine.\n" + userPrompt)
	if first, second := rec.Chats()[0], rec.lastChat(t); second.HistoryUID == "" {
		t.Errorf("the message after the stop went to a new history, not to %q", first.HistoryUID)
	}
}

// When the stop does not take, a second Ctrl-C leaves the turn: the
// stream is closed, and koe stops the turn for that.
func TestSecondCtrlCLeavesTheTurn(t *testing.T) {
	base, llm := startKoe(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("la la la "), Endless: true, Interval: 2 * time.Millisecond}))
	rec := &recorder{swallowStops: true}
	s := startChat(t, startRecorder(t, base, rec), Settings{}, false)
	s.waitFor(userPrompt)
	s.send("Sing.")
	s.waitFor("koe> la")
	s.interrupt()
	s.interrupt()
	s.waitFor(markInterrupted + " left the turn\n")
	s.waitFor(userPrompt)
	select {
	case <-llm.Disconnects():
	case <-time.After(hangGuard):
		t.Fatal("the LLM stream went on after the chat left the turn")
	}
	s.interrupt() // at the prompt: quit
	if err := s.ended(); err != nil {
		t.Errorf("Ctrl-C at the prompt: %v", err)
	}
}

// /rate, /new and /history change what the next message asks for.
func TestCommands(t *testing.T) {
	base, _ := startKoe(t, fakellm.Echo(0))
	rec := &recorder{}
	s := startChat(t, startRecorder(t, base, rec), Settings{}, false)
	s.waitFor(userPrompt)

	s.send("/history")
	s.waitFor("no character yet")
	s.send("/rate 0.7")
	s.waitFor("must be a number from 0.1 to 0.5")
	s.send("/rate 0.2")
	s.waitFor(userPrompt)
	s.send("first")
	s.waitFor("You said: first.\n" + userPrompt)
	if r := rec.lastChat(t).CompressionRate; r == nil || *r != 0.2 {
		t.Errorf("compression_rate %v after /rate 0.2", r)
	}
	firstUID := ""
	s.send("again")
	s.waitFor("You said: again.\n" + userPrompt)
	if firstUID = rec.lastChat(t).HistoryUID; firstUID == "" {
		t.Fatal("the second message started a new history")
	}

	s.send("/new")
	s.waitFor(userPrompt)
	s.send("/rate default")
	s.waitFor(userPrompt)
	s.send("second")
	s.waitFor("You said: second.\n" + userPrompt)
	if last := rec.lastChat(t); last.HistoryUID != "" || last.CompressionRate != nil {
		t.Errorf("after /new and /rate default: %+v, want no history and no rate", last)
	}

	s.send("/history")
	list := s.waitFor("/history <n> continues one.")
	// Newest first, but both histories' latest messages may be of the
	// same second: find the first history's number.
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 4 {
		t.Fatalf("/history shows:\n%s\nwant two histories", list)
	}
	pick := ""
	for _, l := range lines[1:3] {
		current := strings.HasPrefix(l, "*")
		if strings.Contains(l, firstUID) {
			if current || !strings.Contains(l, "You said: again.") {
				t.Errorf("/history shows %s as %q: want it not current, with its latest message", firstUID, l)
			}
			pick = strings.Fields(strings.TrimPrefix(l, "*"))[0]
		} else if !current || !strings.Contains(l, "You said: second.") {
			t.Errorf("/history shows the new history as %q: want it current, with its latest message", l)
		}
	}
	if pick == "" {
		t.Fatalf("/history shows:\n%s\nwithout %s", list, firstUID)
	}
	s.send("/history " + pick)
	shown := s.waitFor("continues history " + firstUID + ".")
	want := []string{"you> first", "koe> You said: first.", "you> again", "koe> You said: again."}
	if got := strings.Split(strings.TrimSpace(shown), "\n")[1:5]; !slices.Equal(got, want) {
		t.Errorf("/history %s shows %q, want %q", pick, got, want)
	}
	s.waitFor(userPrompt)
	s.send("third")
	s.waitFor("You said: third.\n" + userPrompt)
	if got := rec.lastChat(t).HistoryUID; got != firstUID {
		t.Errorf("after /history %s the message went to %q, want %q", pick, got, firstUID)
	}

	s.send("/history 9")
	s.waitFor("there is no history 9")
	s.send("/history no-such-history")
	s.waitFor("error: ")
	s.send("/bogus")
	s.waitFor("unknown command /bogus")
	s.send("/help")
	s.waitFor("/quit")
}

// What koe refuses is shown, and the chat goes on.
func TestServerErrorsAreShown(t *testing.T) {
	const token = "a-test-token-0123456789"
	base, _ := startKoe(t, fakellm.Echo(0), func(cfg *config.Config) { cfg.Server.AuthToken = token })

	s := startChat(t, base, Settings{}, false)
	s.waitFor(userPrompt)
	s.send("Hi!")
	s.waitFor("-token or KOE_AUTH_TOKEN)")
	s.waitFor(userPrompt)

	s = startChat(t, base, Settings{Token: token, History: "no-such-history"}, false)
	s.waitFor(userPrompt)
	s.send("Hi!")
	s.waitFor("error: ")
	s.waitFor(userPrompt)
	s.send("/new")
	s.send("Hi!")
	s.waitFor("koe> You said: Hi!.\n" + userPrompt)
}

func TestCtrlDQuits(t *testing.T) {
	s := startChat(t, "http://127.0.0.1:1", Settings{}, false)
	s.waitFor(userPrompt)
	_ = s.in.Close()
	if err := s.ended(); err != nil {
		t.Errorf("end of input: %v", err)
	}
}

// An unreachable koe is an error that says where the chat looked.
func TestUnreachableKoe(t *testing.T) {
	s := startChat(t, "http://127.0.0.1:1", Settings{}, false)
	s.waitFor(userPrompt)
	s.send("Hi!")
	s.waitFor("cannot reach koe at http://127.0.0.1:1")
	s.waitFor(userPrompt)
}
