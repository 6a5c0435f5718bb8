package chatcli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/proctest"
)

// tmuxSession is the real koe binary's `koe chat` on a pseudo-terminal,
// run by tmux, whose screen the test reads and types into as a user
// would.
type tmuxSession struct {
	t    *testing.T
	tmux string
	sock string
	conf string
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	cmd := exec.Command(s.tmux, append([]string{"-u", "-S", s.sock, "-f", s.conf}, args...)...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cleanEnv is the test's environment without what would change the chat
// (KOE_*) or nest tmux in a tmux the test runs in, in a UTF-8 locale so
// that tmux shows the chat's marks.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KOE_") && !strings.HasPrefix(kv, "TMUX") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG=") {
			env = append(env, kv)
		}
	}
	return append(env, "LANG=C.UTF-8", "TERM=xterm-256color")
}

// screen is the pane's whole text, its scrollback included.
func (s *tmuxSession) screen() string {
	return s.run("capture-pane", "-p", "-J", "-S", "-", "-t", "chat")
}

// waitFor waits until the screen satisfies ok. tmux has no way to say
// that a pane changed, so the screen is read again every few
// milliseconds; only the hang guard bounds the wait.
func (s *tmuxSession) waitFor(what string, ok func(screen string) bool) string {
	s.t.Helper()
	var screen string
	defer func() {
		if s.t.Failed() {
			s.t.Logf("the screen showed:\n%s", screen)
		}
	}()
	testkit.Eventually(s.t, "the screen shows "+what, func() bool {
		screen = s.screen()
		return ok(screen)
	})
	return screen
}

func (s *tmuxSession) keys(keys ...string) {
	s.run(append([]string{"send-keys", "-t", "chat"}, keys...)...)
}
func (s *tmuxSession) typeLine(text string) {
	s.run("send-keys", "-t", "chat", "-l", text)
	s.keys("Enter")
}

// endsWithPrompt: the chat waits at an empty prompt.
func endsWithPrompt(screen string) bool {
	return strings.HasSuffix(strings.TrimRight(screen, " \n"), strings.TrimSpace(userPrompt))
}

// buildKoe builds the koe binary, so that the test runs `koe chat` as
// users do, through main's dispatch and its signal handling.
func buildKoe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "koe")
	build := exec.Command("go", "build", "-o", bin, "koe/cmd/koe")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build koe: %v\n%s", err, out)
	}
	return bin
}

// startTmux runs the command in a tmux session of its own, on a 150x40
// terminal. A shell around it writes its exit status on the screen: tmux
// (3.3a) does not always reap a pane's process, and then never reports
// its status. The shell's trap lets Ctrl-C reach the command alone.
func startTmux(t *testing.T, tmux string, command ...string) *tmuxSession {
	t.Helper()
	dir := t.TempDir()
	s := &tmuxSession{t: t, tmux: tmux, sock: filepath.Join(dir, "sock"), conf: filepath.Join(dir, "tmux.conf")}
	// The pane stays after the shell exits, so that the status can be
	// read.
	if err := os.WriteFile(s.conf, []byte("set -g remain-on-exit on\nset -g history-limit 10000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapped := append([]string{"sh", "-c", `trap : INT; "$@"; echo "[exit status $?]"`, "sh"}, command...)
	s.run(append([]string{"new-session", "-d", "-s", "chat", "-x", "150", "-y", "40", "--"}, wrapped...)...)
	t.Cleanup(func() {
		cmd := exec.Command(tmux, "-S", s.sock, "kill-server")
		cmd.Env = cleanEnv()
		_ = cmd.Run()
	})
	return s
}

var exitStatusLine = regexp.MustCompile(`\[exit status (\d+)\]`)

// exitStatus waits for the command to exit and returns its status.
func (s *tmuxSession) exitStatus() string {
	s.t.Helper()
	screen := s.waitFor("the command to exit", exitStatusLine.MatchString)
	return exitStatusLine.FindStringSubmatch(screen)[1]
}

// One turn, then a reply stopped with Ctrl-C, then Ctrl-D, typed on a
// real terminal.
func TestKoeChatOnATerminal(t *testing.T) {
	tmux := proctest.LookPath(t, "tmux", "tmux")
	bin := buildKoe(t)

	release := make(chan struct{})
	var releaseOnce sync.Once
	base, llm := startKoe(t, fakellm.Script(
		fakellm.Reply{Tokens: fakellm.Words("Hello there."), BeforeChunk: func(i int) {
			if i == 0 {
				<-release
			}
		}},
		fakellm.Reply{Tokens: fakellm.Words("la la la "), Endless: true, Interval: 2 * time.Millisecond},
	), holdable)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the LLM closes

	s := startTmux(t, tmux, bin, "chat", "-url", base)
	s.waitFor("the prompt", endsWithPrompt)
	s.typeLine("Hi!")
	// The LLM holds its first token: the spinner shows the task.
	s.waitFor("the spinner", spinning.MatchString)
	releaseOnce.Do(func() { close(release) })
	screen := s.waitFor("the answer and the next prompt", func(sc string) bool {
		return strings.Contains(sc, "koe> Hello there.") && endsWithPrompt(sc)
	})
	if strings.Contains(screen, "thinking") {
		t.Errorf("the spinner's line was left on the screen:\n%s", screen)
	}

	s.typeLine("Sing.")
	s.waitFor("the song", func(sc string) bool { return strings.Contains(sc, "koe> la la") })
	s.keys("C-c")
	screen = s.waitFor("the stopped turn and the next prompt", func(sc string) bool {
		return strings.Contains(sc, markInterrupted+" interrupted") && endsWithPrompt(sc)
	})
	select {
	case <-llm.Disconnects():
	case <-time.After(hangGuard):
		t.Fatalf("koe did not stop the LLM after Ctrl-C; the screen showed:\n%s", screen)
	}

	s.keys("C-d")
	if status := s.exitStatus(); status != "0" {
		t.Errorf("koe chat exited with status %s after Ctrl-D; the screen showed:\n%s", status, s.screen())
	}
}

// Ctrl-C at the prompt leaves; an unreachable koe is an error the chat
// survives.
func TestKoeChatCtrlCAtThePrompt(t *testing.T) {
	tmux := proctest.LookPath(t, "tmux", "tmux")
	s := startTmux(t, tmux, buildKoe(t), "chat", "-url", "http://127.0.0.1:1")
	s.waitFor("the prompt", endsWithPrompt)
	s.typeLine("Hi!")
	s.waitFor("the error and the next prompt", func(sc string) bool {
		return strings.Contains(sc, "cannot reach koe at http://127.0.0.1:1") && endsWithPrompt(sc)
	})
	s.keys("C-c")
	if status := s.exitStatus(); status != "0" {
		t.Errorf("koe chat exited with status %s after Ctrl-C at the prompt; the screen showed:\n%s", status, s.screen())
	}
}
