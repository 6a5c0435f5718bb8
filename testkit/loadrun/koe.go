// Package loadrun runs a built koe binary for the measuring tools
// (cmd/koe-load, cmd/koe-hostile): against the fake LLM of testkit/fakellm,
// on a free loopback port, with a data directory and configuration of its
// own, and reads what the kernel knows about the process.
//
// It is a tool package, never a product path: it starts only the binary it
// is given and listens only on loopback.
package loadrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"koe/testkit/fakellm"
)

// Options describe the koe to start.
type Options struct {
	// Bin is the koe binary.
	Bin string
	// Respond is what the fake LLM answers (nil: an empty reply).
	Respond func(fakellm.Request) fakellm.Reply
	// ConfigFile is koe's configuration file. When it is empty, Config is
	// written to conf.yaml in the temporary directory and used instead.
	// The LLM, the port and the data directory are always set by Launch.
	ConfigFile string
	Config     string
	// ConfigFor, when set (and ConfigFile is not), writes the
	// configuration instead of Config, for settings that name the fake
	// LLM's URL (a speech engine pointed at its speech endpoint).
	ConfigFor func(llmURL string) string
	// Speech, when set, decides the fake LLM's speech answers.
	Speech func(fakellm.SpeechRequest) fakellm.SpeechReply
	// TempPrefix names the temporary directory that holds koe's data, its
	// configuration and its log.
	TempPrefix string
	// KeepLog keeps that directory (and so the log) after Close.
	KeepLog bool
	// FileLimit, when not 0, is koe's open-file limit (soft and hard), so
	// that running out of descriptors can be provoked with a modest number
	// of connections. 0 leaves koe the limit this process has.
	FileLimit uint64
	// Args, when set, is the command line Bin gets instead of KoeArgs:
	// to add flags (-pprof), or to start a stand-in for koe (koe-load's
	// bare relay), which gets the same fake LLM through the same
	// environment variables and must listen on port.
	Args func(port int, configFile, dataDir string) []string
}

// KoeArgs is koe's command line under Launch.
func KoeArgs(port int, configFile, dataDir string) []string {
	return []string{"-config", configFile, "-data", dataDir, "-port", strconv.Itoa(port)}
}

// Koe is a koe process started by Launch. Close it.
type Koe struct {
	PID     int
	Port    int
	URL     string // ws://127.0.0.1:PORT/client-ws
	Dir     string // data directory, configuration and log
	LogPath string
	LLM     *fakellm.Server

	opts    Options
	cmd     *exec.Cmd
	logFile *os.File
	exited  chan struct{} // closed once the process has been waited for
	state   *os.ProcessState
	waitErr error
}

// Launch starts the fake LLM and a koe wired to it, on free loopback ports.
// It does not wait for koe to listen: call WaitListening.
func Launch(ctx context.Context, o Options) (*Koe, error) {
	llm, err := fakellm.Start("127.0.0.1:0", o.Respond)
	if err != nil {
		return nil, fmt.Errorf("start fake LLM: %w", err)
	}
	// A long run would otherwise keep every request body.
	llm.SetRecording(false)
	if o.Speech != nil {
		llm.SetSpeech(o.Speech)
	}
	if o.ConfigFor != nil {
		o.Config = o.ConfigFor(llm.URL())
	}
	port, err := FreePort()
	if err != nil {
		_ = llm.Close()
		return nil, err
	}
	dir, err := os.MkdirTemp("", o.TempPrefix)
	if err != nil {
		_ = llm.Close()
		return nil, err
	}
	cleanup := func() {
		_ = llm.Close()
		if !o.KeepLog {
			_ = os.RemoveAll(dir)
		}
	}
	conf := o.ConfigFile
	if conf == "" {
		conf = filepath.Join(dir, "conf.yaml")
		if err := os.WriteFile(conf, []byte(o.Config), 0o600); err != nil {
			cleanup()
			return nil, err
		}
	}
	args := KoeArgs(port, conf, dir)
	if o.Args != nil {
		args = o.Args(port, conf, dir)
	}
	var cmd *exec.Cmd
	if o.FileLimit > 0 {
		// The shell lowers its own limits and then becomes koe, so koe
		// keeps the pid and starts under them.
		script := fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, o.FileLimit)
		cmd = exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, o.Bin}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, o.Bin, args...)
	}
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+llm.URL(), "KOE_LLM_MODEL="+fakellm.ModelID, "OPENAI_API_KEY=load")

	logFile, err := os.Create(filepath.Join(dir, "koe.log"))
	if err != nil {
		cleanup()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		cleanup()
		return nil, fmt.Errorf("start koe: %w", err)
	}
	k := &Koe{
		PID:     cmd.Process.Pid,
		Port:    port,
		URL:     fmt.Sprintf("ws://127.0.0.1:%d/client-ws", port),
		Dir:     dir,
		LogPath: logFile.Name(),
		LLM:     llm,
		opts:    o,
		cmd:     cmd,
		logFile: logFile,
		exited:  make(chan struct{}),
	}
	// The process is this goroutine's owner: it ends when koe does, and
	// Close makes sure koe does.
	go func() {
		k.waitErr = cmd.Wait()
		k.state = cmd.ProcessState
		close(k.exited)
	}()
	return k, nil
}

// Addr is koe's address, 127.0.0.1:PORT.
func (k *Koe) Addr() string { return fmt.Sprintf("127.0.0.1:%d", k.Port) }

// Exited is closed when the koe process has ended.
func (k *Koe) Exited() <-chan struct{} { return k.exited }

// Running reports whether the koe process is still alive.
func (k *Koe) Running() bool {
	select {
	case <-k.exited:
		return false
	default:
		return true
	}
}

// WaitListening waits until koe accepts connections on its port, at most
// within, and fails early when koe exits first.
func (k *Koe) WaitListening(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", k.Addr(), time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if !k.Running() {
			return fmt.Errorf("koe exited before it listened on port %d (%s; see its log)", k.Port, k.ExitStatus())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("koe did not start listening on port %d (see its log)", k.Port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Exit is how a stop went.
type Exit struct {
	Took   time.Duration // from the signal to the end of the process
	Status string        // "exit status 0", "signal: killed"…
	Code   int           // exit code; -1 when a signal ended koe
	Killed bool          // koe outlived the grace period and was killed
}

// Stop sends koe SIGTERM and waits for it to end. After grace (0: no
// limit, except the context Launch was given) it kills koe.
func (k *Koe) Stop(grace time.Duration) Exit {
	if !k.Running() {
		return k.exit(0, false)
	}
	start := time.Now()
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	if grace <= 0 {
		<-k.exited
		return k.exit(time.Since(start), false)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-k.exited:
		return k.exit(time.Since(start), false)
	case <-t.C:
		_ = k.cmd.Process.Kill()
		<-k.exited
		return k.exit(time.Since(start), true)
	}
}

func (k *Koe) exit(took time.Duration, killed bool) Exit {
	e := Exit{Took: took, Status: k.ExitStatus(), Code: -1, Killed: killed}
	if k.state != nil {
		e.Code = k.state.ExitCode()
	}
	return e
}

// ExitStatus describes how koe ended, or "running".
func (k *Koe) ExitStatus() string {
	if k.Running() {
		return "running"
	}
	if k.state != nil {
		return k.state.String()
	}
	var ee *exec.ExitError
	if errors.As(k.waitErr, &ee) {
		return ee.String()
	}
	return fmt.Sprint(k.waitErr)
}

// Close kills koe if it still runs, stops the fake LLM and removes the
// temporary directory unless the log is to be kept.
func (k *Koe) Close() {
	if k.Running() {
		_ = k.cmd.Process.Kill()
	}
	<-k.exited
	_ = k.logFile.Close()
	_ = k.LLM.Close()
	if !k.opts.KeepLog {
		_ = os.RemoveAll(k.Dir)
	}
}

// LogSize is the size of koe's log so far, in bytes.
func (k *Koe) LogSize() int64 {
	fi, err := os.Stat(k.LogPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// FreePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
