package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"koe/testkit"
)

// syncBuffer collects what koe logs; the server logs from its own
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func noEnv(string) string { return "" }

// keepDefaultLogger restores the process-wide logger run replaces.
func keepDefaultLogger(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
}

func writeConf(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "conf.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Validation sees the flags: a bad -port is refused at start, and a good
// one rescues a bad value in the file.
func TestFlagsAreValidated(t *testing.T) {
	path := writeConf(t, "log_level: info\n")
	_, _, err := loadConfig([]string{"-config", path, "-port", "70000"}, &bytes.Buffer{}, noEnv)
	if err == nil || !strings.Contains(err.Error(), "port") {
		t.Errorf("-port 70000: error %v, want one about the port", err)
	}
	_, _, err = loadConfig([]string{"-config", path, "-data", ""}, &bytes.Buffer{}, noEnv)
	if err == nil || !strings.Contains(err.Error(), "data_dir") {
		t.Errorf("-data '': error %v, want one about data_dir", err)
	}

	path = writeConf(t, "server:\n  port: 70000\n")
	cfg, _, err := loadConfig([]string{"-config", path, "-port", "0", "-host", "::1"}, &bytes.Buffer{}, noEnv)
	if err != nil {
		t.Fatalf("-port 0 over port: 70000: %v", err)
	}
	if cfg.Server.Port != 0 || cfg.Server.Host != "::1" {
		t.Errorf("port=%d host=%q, want the flags' 0 and ::1", cfg.Server.Port, cfg.Server.Host)
	}
}

func TestBadCommandLine(t *testing.T) {
	path := writeConf(t, "")
	if _, _, err := loadConfig([]string{"-config", path, "extra"}, &bytes.Buffer{}, noEnv); err == nil {
		t.Error("an extra argument was accepted")
	}
	var out bytes.Buffer
	_, _, err := loadConfig([]string{"-bogus"}, &out, noEnv)
	var usage usageError
	if !errors.As(err, &usage) || !strings.Contains(out.String(), "-bogus") {
		t.Errorf("-bogus: error %v, output %q; want a usage error with the problem printed", err, out.String())
	}
}

// The first line koe logs (no configuration file) already goes through the
// text handler on stderr.
func TestFirstLogLineIsSlog(t *testing.T) {
	keepDefaultLogger(t)
	t.Chdir(t.TempDir()) // no conf.yaml here
	var stderr syncBuffer
	err := run(context.Background(), []string{"-port", "70000"}, &stderr, noEnv)
	if err == nil {
		t.Fatal("run accepted -port 70000")
	}
	first, _, _ := strings.Cut(stderr.String(), "\n")
	if !strings.HasPrefix(first, "time=") || !strings.Contains(first, `level=INFO msg="no configuration file; using the defaults"`) {
		t.Errorf("first log line %q is not the text handler's", first)
	}
}

// The configured level applies once the file is read: at warn, koe's info
// lines (listening, shutting down) are not written.
func TestConfiguredLogLevel(t *testing.T) {
	for _, tc := range []struct {
		level string
		want  bool
	}{{"warn", false}, {"info", true}} {
		t.Run(tc.level, func(t *testing.T) {
			keepDefaultLogger(t)
			port := freePort(t)
			path := writeConf(t, "log_level: "+tc.level+"\ndata_dir: "+filepath.ToSlash(t.TempDir())+
				"\nasr:\n  engine: none\ncharacter:\n  tts:\n    engine: none\n")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stderr syncBuffer
			done := make(chan error, 1)
			go func() { done <- run(ctx, []string{"-config", path, "-port", port}, &stderr, noEnv) }()
			waitHealthy(t, "http://127.0.0.1:"+port+"/healthz", done)
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run: %v", err)
			}
			out := stderr.String()
			if got := strings.Contains(out, `msg="koe is listening"`); got != tc.want {
				t.Errorf("log_level %s: listening line written = %v, want %v; log:\n%s", tc.level, got, tc.want, out)
			}
			if root := os.Geteuid() == 0; strings.Contains(out, `msg="koe runs as root`) != root {
				t.Errorf("root: %v, but the warning about it is not right; log:\n%s", root, out)
			}
			if strings.Contains(out, "level=DEBUG") {
				t.Errorf("debug lines at log_level %s:\n%s", tc.level, out)
			}
		})
	}
}

// freePort finds a port nothing listens on (run cannot report the one it
// picked for -port 0).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// waitHealthy polls url until koe answers, or run ends early.
func waitHealthy(t *testing.T, url string, done <-chan error) {
	t.Helper()
	testkit.Eventually(t, "koe answers "+url, func() bool {
		select {
		case err := <-done:
			t.Fatalf("run ended before serving: %v", err)
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// koe's first argument names a subcommand, or is a flag of the server's;
// help lists the subcommands, and an unknown one is refused with the list.
func TestSubcommands(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		says   string
	}{
		{[]string{"help"}, 0, "koe migrate"},
		{[]string{"nonsense"}, 2, `unknown subcommand "nonsense"`},
		{[]string{"memory"}, 2, "usage: koe memory rebuild"},
		{[]string{"-h"}, 0, "koe chat"},
	} {
		out, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		var errOut syncBuffer
		status := dispatch(tc.args, stdio{in: os.Stdin, out: out, err: &errOut}, noEnv)
		written, _ := os.ReadFile(out.Name())
		out.Close()
		if all := string(written) + errOut.String(); status != tc.status || !strings.Contains(all, tc.says) {
			t.Errorf("koe %v: status %d, want %d; said %q, want it to say %q", tc.args, status, tc.status, all, tc.says)
		}
	}
}
