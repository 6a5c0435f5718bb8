// Package cdp is a minimal Chrome DevTools Protocol client for koe's
// browser tests. It starts a headless Chromium, opens pages, navigates,
// evaluates JavaScript, sends real mouse and keyboard input and takes
// screenshots — just enough to drive koe's own web page end to end
// without Node.js or a browser-automation framework.
//
// Every goroutine it starts has an owner and stops when that owner closes:
// one reader per page connection (stopped by Page.Close or Browser.Close)
// and one process waiter per browser (stopped by Browser.Close).
package cdp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNoBrowser means no Chromium or Chrome binary was found.
var ErrNoBrowser = errors.New("cdp: no Chromium found (install Debian's chromium package, or set CHROMIUM to the browser binary)")

// candidates are the binary names FindBrowser looks for on PATH, in order.
var candidates = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome", "headless_shell"}

// FindBrowser returns the browser binary to use: $CHROMIUM if set,
// otherwise the first candidate found on PATH.
func FindBrowser() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%w: CHROMIUM=%s: %v", ErrNoBrowser, p, err)
		}
		return path, nil
	}
	for _, name := range candidates {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", ErrNoBrowser
}

// Options configure Launch. The zero value works.
type Options struct {
	// Path is the browser binary; empty means FindBrowser.
	Path string
	// UserDataDir is the browser profile directory. Empty means a fresh
	// temporary directory that Close removes. Tests pass t.TempDir().
	UserDataDir string
	// Width and Height are the window size in CSS pixels; 0 means
	// 1024×768.
	Width, Height int
	// AutoplayPolicy, if set, is Chromium's --autoplay-policy. Headless
	// Chromium, like desktop Chrome, lets a page play sound only after the
	// user has interacted with it ("document-user-activation-required");
	// "no-user-gesture-required" lets pages play sound at once, as tests
	// of speaking pages usually need.
	AutoplayPolicy string
	// MuteAudio silences the browser's audio output (--mute-audio).
	// Media still plays, in real time and with all its events, so a test
	// of a speaking page need not be heard on a machine with speakers.
	MuteAudio bool
	// FakeMicrophone, if set, is a WAV file the browser uses as its only
	// microphone, and pages get it without a permission prompt. Each
	// getUserMedia capture plays the file once from its start, in real
	// time, and then silence (Chromium's --use-fake-device-for-media-stream,
	// --use-fake-ui-for-media-stream and
	// --use-file-for-fake-audio-capture=FILE%noloop). The path must not
	// contain '%', which separates Chromium's options there; 16-bit PCM
	// WAV files work best.
	FakeMicrophone string
	// Args are extra command-line flags, added after the defaults.
	Args []string
	// Log, if set, receives the browser's stdout and stderr. Either way
	// the last few kilobytes are kept for error messages.
	Log io.Writer
}

// Browser is a running headless browser. Close it.
type Browser struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // read only after exited is closed
	output  *tail
	base    string // http://127.0.0.1:PORT
	tempDir string // removed by Close, if Launch created it
	// xdgConfig is the browser's XDG_CONFIG_HOME, unique to it, which
	// finds the crash handlers that leave its process group.
	xdgConfig string
	http      *http.Client

	mu     sync.Mutex
	pages  map[*Page]struct{}
	closed bool
}

// startupPoll is how often Launch looks for the DevTools port file.
const startupPoll = 50 * time.Millisecond

// Launch starts a headless browser and waits until its DevTools endpoint
// is up. ctx bounds the start only; the browser runs until Close.
func Launch(ctx context.Context, opts Options) (*Browser, error) {
	path := opts.Path
	if path == "" {
		var err error
		if path, err = FindBrowser(); err != nil {
			return nil, err
		}
	}
	b := &Browser{
		exited: make(chan struct{}),
		output: &tail{max: 16 << 10},
		pages:  map[*Page]struct{}{},
		// No keep-alive: an idle pooled connection would keep a
		// transport goroutine alive after Close.
		http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
	dir := opts.UserDataDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "koe-cdp-"); err != nil {
			return nil, fmt.Errorf("cdp: create profile directory: %w", err)
		}
		b.tempDir = dir
	}
	portFile := filepath.Join(dir, "DevToolsActivePort")
	// A file left by an earlier browser in a reused profile would point at
	// a dead port.
	if err := os.Remove(portFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		b.removeTemp()
		return nil, fmt.Errorf("cdp: remove stale %s: %w", portFile, err)
	}
	args, err := launchArgs(opts, dir)
	if err != nil {
		b.removeTemp()
		return nil, err
	}
	b.cmd = exec.Command(path, args...)
	// Chromium keeps crash reports and caches under the XDG directories,
	// by default in the user's home; keep them in the profile instead.
	// (--disable-crashpad-for-testing would avoid the crash handler, but
	// with it Debian's Chromium 156 crashes its network service.)
	b.xdgConfig = filepath.Join(dir, "xdg-config") + string(filepath.Separator)
	b.cmd.Env = append(os.Environ(),
		"XDG_CONFIG_HOME="+b.xdgConfig,
		"XDG_CACHE_HOME="+filepath.Join(dir, "xdg-cache"))
	var out io.Writer = b.output
	if opts.Log != nil {
		out = io.MultiWriter(b.output, opts.Log)
	}
	b.cmd.Stdout, b.cmd.Stderr = out, out
	// If a helper process outlives the browser and holds the output pipe,
	// Wait gives up on the pipe after this long instead of hanging.
	b.cmd.WaitDelay = 2 * time.Second
	setProcessGroup(b.cmd)
	if err := b.cmd.Start(); err != nil {
		b.removeTemp()
		return nil, fmt.Errorf("cdp: start %s: %w", path, err)
	}
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()

	port, err := b.waitForPort(ctx, portFile)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	b.base = "http://127.0.0.1:" + strconv.Itoa(port)
	return b, nil
}

// launchArgs is the browser's command line (without the binary) for opts,
// with its profile in dir.
func launchArgs(opts Options, dir string) ([]string, error) {
	w, h := opts.Width, opts.Height
	if w <= 0 || h <= 0 {
		w, h = 1024, 768
	}
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--remote-debugging-port=0", "--user-data-dir=" + dir,
		fmt.Sprintf("--window-size=%d,%d", w, h),
	}
	if opts.AutoplayPolicy != "" {
		args = append(args, "--autoplay-policy="+opts.AutoplayPolicy)
	}
	if opts.MuteAudio {
		args = append(args, "--mute-audio")
	}
	if mic := opts.FakeMicrophone; mic != "" {
		if strings.Contains(mic, "%") {
			return nil, fmt.Errorf("cdp: FakeMicrophone %q: Chromium cannot take a path with %%", mic)
		}
		abs, err := filepath.Abs(mic)
		if err != nil {
			return nil, fmt.Errorf("cdp: FakeMicrophone: %w", err)
		}
		if _, err := os.Stat(abs); err != nil {
			// Chromium would quietly fall back to a beeping fake device.
			return nil, fmt.Errorf("cdp: FakeMicrophone: %w", err)
		}
		args = append(args, "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
			"--use-file-for-fake-audio-capture="+abs+"%noloop")
	}
	args = append(args, opts.Args...)
	return append(args, "about:blank"), nil
}

// waitForPort polls the file in which the browser announces the port it
// picked for --remote-debugging-port=0.
func (b *Browser) waitForPort(ctx context.Context, portFile string) (int, error) {
	tick := time.NewTicker(startupPoll)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(portFile); err == nil {
			// Line one is the port, line two the browser target's path;
			// wait for both so the file is known to be complete.
			if first, _, ok := strings.Cut(string(data), "\n"); ok {
				port, err := strconv.Atoi(strings.TrimSpace(first))
				if err != nil || port <= 0 {
					return 0, fmt.Errorf("cdp: bad DevToolsActivePort %q", data)
				}
				return port, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("cdp: waiting for the browser's DevTools port: %w; browser output:\n%s", ctx.Err(), b.output)
		case <-b.exited:
			return 0, fmt.Errorf("cdp: browser exited during start (%v); browser output:\n%s", b.waitErr, b.output)
		case <-tick.C:
		}
	}
}

// target is an entry of /json/list or the answer of /json/new.
type target struct {
	ID                   string `json:"id"`
	Type                 string `json:"type"`
	URL                  string `json:"url"`
	WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
}

// NewPage opens a new tab on about:blank and connects to it.
func (b *Browser) NewPage(ctx context.Context) (*Page, error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("cdp: new page: %w", ErrClosed)
	}
	var t target
	// Current Chrome requires PUT for /json/new.
	if err := b.getJSON(ctx, http.MethodPut, "/json/new?"+url.QueryEscape("about:blank"), &t); err != nil {
		return nil, err
	}
	if t.WebSocketDebuggerURL == "" {
		return nil, fmt.Errorf("cdp: new target %q has no webSocketDebuggerUrl", t.ID)
	}
	p := &Page{b: b, id: t.ID}
	c, err := dial(ctx, t.WebSocketDebuggerURL, p.event)
	if err != nil {
		return nil, err
	}
	p.c = c
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = c.close()
		return nil, fmt.Errorf("cdp: new page: %w", ErrClosed)
	}
	b.pages[p] = struct{}{}
	b.mu.Unlock()
	for _, domain := range []string{"Page.enable", "Runtime.enable"} {
		if err := p.c.call(ctx, domain, nil, nil); err != nil {
			_ = p.Close()
			return nil, err
		}
	}
	return p, nil
}

// Targets lists the browser's targets (tabs, workers…), from /json/list.
func (b *Browser) Targets(ctx context.Context) ([]string, error) {
	var ts []target
	if err := b.getJSON(ctx, http.MethodGet, "/json/list", &ts); err != nil {
		return nil, err
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Type + " " + t.URL
	}
	return out, nil
}

func (b *Browser) getJSON(ctx context.Context, method, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, b.base+path, nil)
	if err != nil {
		return fmt.Errorf("cdp: %s %s: %w", method, path, err)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return fmt.Errorf("cdp: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("cdp: %s %s: read: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cdp: %s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(body))
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("cdp: %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// Output returns the tail of the browser's own log, for failure messages.
func (b *Browser) Output() string { return b.output.String() }

// Close disconnects every page, kills the browser and all its helper
// processes, waits for it, and removes a profile directory Launch created.
// It is safe to call more than once.
func (b *Browser) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	pages := make([]*Page, 0, len(b.pages))
	for p := range b.pages {
		pages = append(pages, p)
	}
	b.pages = map[*Page]struct{}{}
	b.mu.Unlock()

	for _, p := range pages {
		_ = p.c.close()
	}
	// Find the strays before the kill: they exit on their own once the
	// browser is gone, and their pids could then be reused.
	stray := strays(b.xdgConfig, b.cmd.Process.Pid)
	kill(b.cmd, stray)
	<-b.exited
	waitGone(b.cmd, stray, 5*time.Second)
	b.removeTemp()
	return nil
}

func (b *Browser) removeTemp() {
	if b.tempDir != "" {
		_ = os.RemoveAll(b.tempDir)
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
