package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// profiler takes the profiles of one server in one run through the -pprof
// listener koe-load started it with.
type profiler struct {
	base    string // http://127.0.0.1:PORT/debug/pprof/
	dir     string
	prefix  string // koe-n100-run1, floor-n100-run1
	seconds int
	http    *http.Client
	cpuDone chan error // the CPU profile's and the trace's downloads, as each ends
	files   []string
}

func newProfiler(addr, name string, o options, index int) *profiler {
	return &profiler{
		base:    "http://" + addr + "/debug/pprof/",
		dir:     o.profileDir,
		prefix:  fmt.Sprintf("%s-n%d-run%d", name, o.n, index),
		seconds: o.profileSeconds(),
		http:    &http.Client{},
	}
}

func (p *profiler) path(name string) string {
	if name == "trace" {
		return filepath.Join(p.dir, p.prefix+"-trace.out")
	}
	return filepath.Join(p.dir, p.prefix+"-"+name+".pb.gz")
}

// heapProfile is the heap profile after a collection: the runtime
// publishes allocations only at the end of a GC cycle, so without one a
// snapshot misses what was allocated since the last. It holds the
// allocations since the start (alloc_space, alloc_objects) as well as
// what is in use.
const heapProfile = "heap?gc=1"

// snapshot saves the server's profile kind as name.
func (p *profiler) snapshot(ctx context.Context, kind, name string) error {
	if err := p.download(ctx, p.base+kind, p.path(name)); err != nil {
		return err
	}
	p.files = append(p.files, p.path(name))
	return nil
}

func (p *profiler) download(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("profile %s: %w", url, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	return nil
}

// recording is the frame of net/http/pprof that waits out a CPU profile
// or an execution trace: the server is in it only after it has started
// recording. The goroutine dump groups identical stacks, so the two
// recordings show as two different stacks holding it.
const recording = "net/http/pprof.sleep"

// recordings are what startCPU asks for: the CPU profile and an execution
// trace of the same seconds (go tool trace; -pprof=sched shows where
// goroutines waited to run).
var recordings = []struct{ endpoint, name string }{
	{"profile", "cpu"},
	{"trace", "trace"},
}

// startCPU asks for a CPU profile and an execution trace of p.seconds and
// returns once the server records both, which its goroutine dump shows.
func (p *profiler) startCPU(ctx context.Context) error {
	p.cpuDone = make(chan error, len(recordings))
	for _, r := range recordings {
		url := fmt.Sprintf("%s%s?seconds=%d", p.base, r.endpoint, p.seconds)
		// The download's goroutine ends when the server answers (after
		// p.seconds) or ctx ends; finish waits for it.
		go func() { p.cpuDone <- p.download(ctx, url, p.path(r.name)) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		dump, err := p.get(ctx, p.base+"goroutine?debug=1")
		if err != nil {
			return err
		}
		if strings.Count(dump, recording) >= len(recordings) {
			return nil
		}
		select {
		case err := <-p.cpuDone:
			p.cpuDone <- err // for finish
			return fmt.Errorf("a profile ended before it began: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("the server did not start the CPU profile within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *profiler) get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return string(body), err
}

// finish waits for the CPU profile and returns the files written. turns
// is how long the turns took: a profile shorter than that missed the end.
func (p *profiler) finish(turns time.Duration) ([]string, error) {
	for range recordings {
		if err := <-p.cpuDone; err != nil {
			return nil, err
		}
	}
	for _, r := range recordings {
		p.files = append(p.files, p.path(r.name))
	}
	if turns > time.Duration(p.seconds)*time.Second {
		fmt.Printf("note: the turns took %s, longer than the %d s CPU profile; raise -profile-seconds\n",
			turns.Round(time.Millisecond), p.seconds)
	}
	return p.files, nil
}
