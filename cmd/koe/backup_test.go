package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"koe/bolt"
	"koe/testkit/fakellm"
)

// echoLLM is a fake LLM that echoes at once, closed at cleanup.
func echoLLM(t *testing.T) *fakellm.Server {
	t.Helper()
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Echo(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)
	return llm
}

// textKoeConf writes dir/conf.yaml for a text-only koe on the LLM at
// llmURL, with its data in dir/data and extra top-level keys (YAML lines),
// and returns its path.
func textKoeConf(t *testing.T, dir, llmURL, extra string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "conf.yaml")
	yaml := fmt.Sprintf("data_dir: %s\ncharacters_dir: %s\nlog_level: info\n%sserver:\n  backgrounds_dir: %s\ncharacter:\n  llm:\n    base_url: %s\n    model: %s\n  tts:\n    engine: none\n",
		filepath.Join(dir, "data"), filepath.Join(dir, "characters"), extra, filepath.Join(dir, "bg"), llmURL, fakellm.ModelID)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}

// backupRun runs `koe backup args` through koe's command table and
// returns its exit code and what it printed.
func backupRun(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var stderr strings.Builder
	code := dispatch(append([]string{"backup"}, args...), stdio{in: os.Stdin, out: out, err: &stderr}, os.Getenv)
	said, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return code, string(said) + stderr.String()
}

// backupHolds checks that the backup at path passes its check and holds
// every turn of ended, answered.
func backupHolds(t *testing.T, path string, ended []seenTurn) {
	t.Helper()
	ctx := context.Background()
	if _, err := bolt.VerifyBackup(ctx, path); err != nil {
		t.Fatal(err)
	}
	copied, err := bolt.OpenReadOnly(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	missing := 0
	for _, s := range ended {
		records, err := copied.Messages(ctx, "koe_default", s.history)
		if err != nil {
			t.Fatalf("history of %q in the backup: %v", s.text, err)
		}
		if !answered(records, s.text) {
			if missing++; missing <= 3 {
				t.Errorf("turn %q ended before the backup began but is not in it with its reply", s.text)
			}
		}
	}
}

// koe backup copies the koe.db of a koe that is storing turns as it runs
// (a real process, real sockets): the copy passes bbolt's check and holds
// every turn that had ended before the backup began, and the sessions go
// on turning during and after it. Stopped, the same data directory is
// copied directly.
func TestBackupWhileTurnsAreWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("starts koe in a child process")
	}
	const sessions = 20
	llm := echoLLM(t)
	dir := t.TempDir()
	conf := textKoeConf(t, dir, llm.URL(), "")
	data := filepath.Join(dir, "data")
	koe := startKoeProcess(t, conf)
	seen := make(chan seenTurn, sessions*4)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() { talk(koe.addr, i, seen) })
	}
	var ended []seenTurn
	// until collects ended turns until there are n.
	until := func(n int) {
		for len(ended) < n {
			select {
			case s := <-seen:
				ended = append(ended, s)
			case <-koe.exited:
				t.Fatalf("koe exited: %v", koe.err)
			case <-time.After(2 * time.Minute):
				t.Fatalf("only %d turns ended", len(ended))
			}
		}
	}
	until(200)
	before := len(ended)
	// The turns go on; seen keeps filling meanwhile, read after.
	out := filepath.Join(dir, "backups", "koe.db")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	code, said := backupRun(t, "-config", conf, "-url", "http://"+koe.addr, "-o", out)
	if code != 0 || !strings.Contains(said, "verified") {
		t.Fatalf("koe backup of the running koe: exit %d: %s", code, said)
	}
	t.Log(strings.TrimSpace(said))
	// The sessions still turn after the backup.
	until(len(ended) + 2*sessions)
	backupHolds(t, out, ended[:before])
	if left, _ := os.ReadDir(filepath.Dir(out)); len(left) != 1 {
		t.Fatalf("the backups directory holds %d files, want the backup alone", len(left))
	}

	if err := koe.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() { wg.Wait(); close(seen) }()
	for s := range seen {
		ended = append(ended, s)
	}
	<-koe.exited
	stopped := filepath.Join(dir, "backups", "stopped.db")
	code, said = backupRun(t, "-config", conf, "-o", stopped)
	if code != 0 || !strings.Contains(said, "backed up "+filepath.Join(data, "koe.db")) {
		t.Fatalf("koe backup of the stopped data directory: exit %d: %s", code, said)
	}
	t.Log(strings.TrimSpace(said))
	backupHolds(t, stopped, ended)
}
