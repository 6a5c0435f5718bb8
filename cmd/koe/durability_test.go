package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe"
	"koe/bolt"
	"koe/testkit/fakellm"
)

// childEnv makes the test binary run koe itself (see TestMain), so that a
// test can kill a real koe process.
const childEnv = "KOE_TEST_RUN_KOE"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signalContext()
		err := run(ctx, os.Args[1:], os.Stderr, os.Getenv)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "koe child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// koeProcess is koe running in a child process. exited closes when it
// has ended; err is then how.
type koeProcess struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	err    error
	log    syncBuffer // its stderr, line by line
}

var listening = regexp.MustCompile(`ws=wss?://([0-9.:]+)/client-ws`)

// startKoeProcess runs koe with conf in a child process and waits until it
// listens.
func startKoeProcess(t *testing.T, conf string) *koeProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-config", conf, "-port", "0")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	return startKoeCmd(t, cmd)
}

// startKoeCmd starts cmd, a koe, and waits until it listens.
func startKoeCmd(t *testing.T, cmd *exec.Cmd) *koeProcess {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &koeProcess{cmd: cmd, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			_, _ = p.log.Write(append(sc.Bytes(), '\n'))
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	select {
	case p.addr = <-addr:
	case <-p.exited:
		t.Fatalf("koe exited before listening: %v", p.err)
	case <-time.After(60 * time.Second):
		t.Fatal("koe did not start listening")
	}
	return p
}

// seenTurn is a turn a client saw end with conversation-chain-end.
type seenTurn struct{ history, text string }

// talk opens one session in a new history and runs turns until the
// connection breaks, reporting each turn whose end it saw.
func talk(addr string, id int, seen chan<- seenTurn) {
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client-ws", nil)
	if err != nil {
		return
	}
	defer ws.Close()
	send := func(v map[string]any) error {
		data, _ := json.Marshal(v)
		return ws.WriteMessage(websocket.TextMessage, data)
	}
	// until reads frames until one of type typ (control frames by text).
	until := func(typ, text string) (map[string]any, error) {
		for {
			_ = ws.SetReadDeadline(time.Now().Add(2 * time.Minute))
			_, data, err := ws.ReadMessage()
			if err != nil {
				return nil, err
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				return nil, err
			}
			if m["type"] == typ && (text == "" || m["text"] == text) {
				return m, nil
			}
		}
	}
	if send(map[string]any{"type": "create-new-history"}) != nil {
		return
	}
	created, err := until("new-history-created", "")
	if err != nil {
		return
	}
	uid, _ := created["history_uid"].(string)
	for n := 1; ; n++ {
		text := fmt.Sprintf("session %d turn %d", id, n)
		if send(map[string]any{"type": "text-input", "text": text}) != nil {
			return
		}
		if _, err := until("backend-synth-complete", ""); err != nil {
			return
		}
		if send(map[string]any{"type": "frontend-playback-complete"}) != nil {
			return
		}
		if _, err := until("control", "conversation-chain-end"); err != nil {
			return
		}
		seen <- seenTurn{uid, text}
	}
}

// koe is killed with SIGKILL while a hundred sessions turn: every turn a
// client saw end is in its history, with its reply, and the database is
// consistent.
func TestNoTurnLostToSIGKILL(t *testing.T) {
	ctx := t.Context()
	if testing.Short() {
		t.Skip("starts koe in a child process")
	}
	const sessions = 100
	const turnsBeforeKill = 400
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Echo(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.yaml")
	data := filepath.Join(dir, "data")
	yaml := fmt.Sprintf("data_dir: %s\ncharacters_dir: %s\nlog_level: info\nserver:\n  backgrounds_dir: %s\ncharacter:\n  llm:\n    base_url: %s\n    model: %s\n  tts:\n    engine: none\n",
		data, filepath.Join(dir, "characters"), filepath.Join(dir, "bg"), llm.URL(), fakellm.ModelID)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}

	koe := startKoeProcess(t, conf)
	seen := make(chan seenTurn, sessions*4)
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			talk(koe.addr, i, seen)
		}()
	}
	var ended []seenTurn
	for len(ended) < turnsBeforeKill {
		select {
		case s := <-seen:
			ended = append(ended, s)
		case <-koe.exited:
			t.Fatalf("koe exited on its own: %v", koe.err)
		case <-time.After(2 * time.Minute):
			t.Fatalf("only %d turns ended", len(ended))
		}
	}
	if err := koe.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Every client sees its connection break; turns that ended in the
	// meantime count too.
	go func() { wg.Wait(); close(seen) }()
	for s := range seen {
		ended = append(ended, s)
	}
	<-koe.exited

	store, err := bolt.Open(filepath.Join(data, "koe.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Check(ctx); err != nil {
		t.Fatalf("database inconsistent after SIGKILL: %v", err)
	}
	lost := 0
	for _, s := range ended {
		records, err := store.Messages(ctx, "koe_default", s.history)
		if err != nil {
			t.Fatalf("history of %q: %v", s.text, err)
		}
		if !answered(records, s.text) {
			lost++
			if lost <= 3 {
				t.Errorf("turn %q ended for its client but is not stored with its reply", s.text)
			}
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d turns ended before and during the kill; %d lost", len(ended), lost)

	// koe starts again on the same data and serves those histories.
	again := startKoeProcess(t, conf)
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+again.addr+"/client-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	data2, _ := json.Marshal(map[string]any{"type": "fetch-and-set-history", "history_uid": ended[0].history})
	if err := ws.WriteMessage(websocket.TextMessage, data2); err != nil {
		t.Fatal(err)
	}
	for {
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, frame, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(frame), `"history-data"`) {
			if !strings.Contains(string(frame), ended[0].text) {
				t.Fatalf("history-data after restart lacks %q", ended[0].text)
			}
			break
		}
	}
	if err := again.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-again.exited:
		if again.err != nil {
			t.Fatalf("koe did not stop cleanly on SIGTERM: %v", again.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("koe did not stop on SIGTERM")
	}
}

// answered reports whether records hold the human message text followed
// by an AI reply.
func answered(records []koe.Record, text string) bool {
	for i, r := range records {
		if r.Role == koe.RoleHuman && r.Content == text {
			return i+1 < len(records) && records[i+1].Role == koe.RoleAI && records[i+1].Content != ""
		}
	}
	return false
}
