package mcp

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// inheritedEnv is what a stdio server gets of koe's environment, before
// its own env: enough to find programs and a home, not koe's secrets
// (OPENAI_API_KEY and the like). It is the list MCP's Python SDK passes,
// which Open-LLM-VTuber's servers already run with, plus the locale, time
// zone and temp dir.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// exitGrace is how long a stdio server has to exit after its stdin is
// closed, and again after SIGTERM, before it is killed.
const exitGrace = 2 * time.Second

// link is one connection attempt's transport and what must be undone when
// the connection ends, whichever way it ends.
type link struct {
	transport *keptTransport
	// httpTransport holds an HTTP server's connections (nil for stdio).
	httpTransport *http.Transport

	// A stdio server's process, which link runs itself rather than
	// through the SDK's CommandTransport: that one can return from Close
	// before it has waited for the process, so how it ended could not be
	// read safely, and it stops only the process, not what it started.
	cmd    *exec.Cmd
	stderr *stderrLog
	// exited is closed once the process has been waited for; exitErr is
	// then how it ended.
	exited  chan struct{}
	exitErr error
	// files are the parent's ends of the stdin and stdout pipes.
	files []*os.File
	// stderrFile is the read end of the stderr pipe, which readStderr
	// reads until stderrDone.
	stderrFile *os.File
	stderrDone chan struct{}
}

// keptTransport keeps the Connection its transport made, so that a failed
// handshake can still close it: the SDK does not close it on every error
// path.
type keptTransport struct {
	sdk.Transport
	conn sdk.Connection
}

func (t *keptTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	t.conn = c
	return c, err
}

// startLink prepares a connection to the server: for a stdio server it
// starts the process, whose stdout is read a line at a time of at most
// maxLine bytes.
func startLink(cfg ServerConfig, maxLine int, log *slog.Logger) (*link, error) {
	if cfg.URL != "" {
		ht := http.DefaultTransport.(*http.Transport).Clone()
		return &link{
			httpTransport: ht,
			transport: &keptTransport{Transport: &sdk.StreamableClientTransport{
				Endpoint:   cfg.URL,
				HTTPClient: &http.Client{Transport: &headerTransport{base: ht, headers: cfg.Headers}},
				// The SDK's retries of a broken event stream end with the
				// session; fewer of them (5 by default, with growing
				// delays) notice a server that went away in seconds rather
				// than half a minute, and reconnecting is cheap.
				MaxRetries: 2,
			}},
		}, nil
	}
	// Pipes of our own rather than exec's: Wait closes StdoutPipe, which
	// would race with the SDK still reading the last answer, and waits for
	// exec's stderr copier, which a child holding stderr open delays: the
	// process's end would be seen late.
	var pipes [3][2]*os.File // stdin, stdout, stderr: read end, write end
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			for _, p := range pipes[:i] {
				closeAll(p[:])
			}
			return nil, err
		}
		pipes[i] = [2]*os.File{r, w}
	}
	inR, inW, outR, outW, errR, errW := pipes[0][0], pipes[0][1], pipes[1][0], pipes[1][1], pipes[2][0], pipes[2][1]
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = serverEnv(os.Getenv, cfg.Env)
	cmd.Dir = cfg.Cwd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	ownGroup(cmd)
	err := cmd.Start()
	// The child has its own copies now.
	closeAll([]*os.File{inR, outW, errW})
	if err != nil {
		closeAll([]*os.File{inW, outR, errR})
		return nil, err
	}
	l := &link{
		cmd:        cmd,
		stderr:     &stderrLog{log: log},
		exited:     make(chan struct{}),
		files:      []*os.File{inW, outR},
		stderrFile: errR,
		stderrDone: make(chan struct{}),
		transport: &keptTransport{Transport: &sdk.IOTransport{
			Reader: newStdoutFilter(outR, maxLine, log),
			Writer: inW,
			// The filter bounds each line already, and hands the SDK
			// one whole message per line.
			MaxLineLength: -1,
		}},
	}
	go func() {
		l.exitErr = cmd.Wait()
		close(l.exited)
	}()
	go func() {
		_, _ = io.Copy(l.stderr, errR)
		close(l.stderrDone)
	}()
	return l, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// exit is closed when a stdio server's process has ended (nil for HTTP,
// which never is).
func (l *link) exit() <-chan struct{} {
	if l.cmd == nil {
		return nil
	}
	return l.exited
}

// close ends the connection if the SDK has not, and what it left: a stdio
// server is asked to exit by closing its stdin, then signalled, then
// killed, with anything it started, and waited for; an HTTP server's idle
// connections are closed. It returns how a stdio server's process ended,
// for the logs ("" for HTTP).
func (l *link) close() string {
	if l.transport.conn != nil {
		_ = l.transport.conn.Close()
	}
	if l.httpTransport != nil {
		l.httpTransport.CloseIdleConnections()
		return ""
	}
	closeAll(l.files)
	pid := l.cmd.Process.Pid
	// Its stdin closed, a server should exit; if not, it is asked to.
	if !l.waitExit() {
		signalGroup(pid, false)
		l.waitExit()
	}
	// Whatever the server started goes with it.
	signalGroup(pid, true)
	<-l.exited
	// stderr ends when its last holder is gone, unless one escaped the
	// group: then it is cut off.
	select {
	case <-l.stderrDone:
	case <-time.After(exitGrace):
		_ = l.stderrFile.Close()
		<-l.stderrDone
	}
	_ = l.stderrFile.Close()
	return describeExit(l.exitErr)
}

// waitExit waits up to exitGrace for the process to end.
func (l *link) waitExit() bool {
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	select {
	case <-l.exited:
		return true
	case <-t.C:
		return false
	}
}

func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// lastStderr is the last line the server wrote to stderr, which usually
// says why it failed ("" for HTTP or when it wrote nothing).
func (l *link) lastStderr() string {
	if l.stderr == nil {
		return ""
	}
	return l.stderr.last()
}

func serverEnv(getenv func(string) string, own map[string]string) []string {
	env := make([]string, 0, len(inheritedEnv)+len(own))
	for _, k := range inheritedEnv {
		if _, set := own[k]; set {
			continue
		}
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range own {
		env = append(env, k+"="+v)
	}
	return env
}

// headerTransport adds the configured headers to every request the SDK
// sends, without replacing the protocol's own.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		if req.Header.Get(k) == "" {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}

// stderrLog logs what a stdio server writes to stderr, line by line at
// debug level, and keeps a line that says why it failed, for the error.
type stderrLog struct {
	log *slog.Logger

	mu      sync.Mutex
	partial []byte
	lastOne string
	// lastError is the last line that reads like an error, and lines the
	// count of lines when it came.
	lastError        string
	lines, errorLine int
}

// errorWords mark the line worth quoting: the last line is often a stack
// frame or, after Node's uncaught errors, "Node.js v20.x".
var errorWords = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)error|panic|exception|fatal|not found|cannot|denied|no such|invalid|failed`)
})

// recentError is how many lines an error line stays the one quoted.
const recentError = 20

// maxStderrLine bounds a line kept in memory; a longer one is logged in
// pieces.
const maxStderrLine = 4096

func (w *stderrLog) Write(p []byte) (int, error) {
	var lines []string
	w.mu.Lock()
	w.partial = append(w.partial, p...)
	for {
		i, skip := bytes.IndexByte(w.partial, '\n'), 1
		if i < 0 && len(w.partial) < maxStderrLine {
			break
		}
		if i < 0 || i > maxStderrLine {
			i, skip = maxStderrLine, 0
		}
		line := strings.TrimRight(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+skip:]
		if strings.TrimSpace(line) != "" {
			lines = append(lines, line)
			w.lastOne = line
			w.lines++
			if errorWords().MatchString(line) {
				w.lastError, w.errorLine = line, w.lines
			}
		}
	}
	w.mu.Unlock()
	for _, line := range lines {
		w.log.Debug("MCP server stderr", "line", line)
	}
	return len(p), nil
}

// last returns the line that best says why the server failed: the last
// error among the last lines, else the last line.
func (w *stderrLog) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastError != "" && w.lines-w.errorLine < recentError {
		return w.lastError
	}
	if w.lastOne == "" && strings.TrimSpace(string(w.partial)) != "" {
		return strings.TrimSpace(string(w.partial))
	}
	return w.lastOne
}
