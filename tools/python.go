package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const pythonName = "python"

// PythonSettings are the python tool's: off unless enabled, and then run
// in a bubblewrap sandbox with no network, a read-only system, a fresh
// temporary directory as its only writable place, and CPU time, memory,
// process and output limits.
type PythonSettings struct {
	// Command is the interpreter inside the sandbox (default python3).
	Command string `yaml:"command"`
	// Unsandboxed lets the tool run without bubblewrap, as koe's user,
	// with only the resource limits. Off by default: without it, the tool
	// refuses to start where bubblewrap is missing.
	Unsandboxed bool `yaml:"unsandboxed"`
	// CPUSeconds, MemoryMB and MaxOutputBytes bound one run (0: 10 s,
	// 512 MB, 64 KB).
	CPUSeconds     int `yaml:"cpu_seconds"`
	MemoryMB       int `yaml:"memory_mb"`
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// MaxCodeChars bounds the program the model sends (0: 20000).
	MaxCodeChars int `yaml:"max_code_chars"`
}

// Defaults of PythonSettings.
const (
	defaultPythonCommand  = "python3"
	defaultPythonCPU      = 10
	defaultPythonMemoryMB = 512
	defaultPythonOutput   = 64 << 10
	defaultPythonCode     = 20000
	// pythonProcs bounds the processes a run may have at once (a fork
	// bomb stops there).
	pythonProcs = 64
	// pythonWaitDelay bounds how long a finished run waits for output
	// still held open by a process that outlived it.
	pythonWaitDelay = 5 * time.Second
)

func (p PythonSettings) withDefaults() PythonSettings {
	if p.Command == "" {
		p.Command = defaultPythonCommand
	}
	if p.CPUSeconds == 0 {
		p.CPUSeconds = defaultPythonCPU
	}
	if p.MemoryMB == 0 {
		p.MemoryMB = defaultPythonMemoryMB
	}
	if p.MaxOutputBytes == 0 {
		p.MaxOutputBytes = defaultPythonOutput
	}
	if p.MaxCodeChars == 0 {
		p.MaxCodeChars = defaultPythonCode
	}
	return p
}

func (p PythonSettings) check() error {
	switch {
	case p.CPUSeconds < 0 || p.CPUSeconds > 600:
		return fmt.Errorf("tools.python.cpu_seconds %d is out of range: 1 to 600 (default %d)", p.CPUSeconds, defaultPythonCPU)
	case p.MemoryMB < 0 || p.MemoryMB > 0 && p.MemoryMB < 32:
		return fmt.Errorf("tools.python.memory_mb %d is out of range: at least 32 (default %d)", p.MemoryMB, defaultPythonMemoryMB)
	case p.MaxOutputBytes < 0:
		return fmt.Errorf("tools.python.max_output_bytes %d is negative (default %d)", p.MaxOutputBytes, defaultPythonOutput)
	case p.MaxCodeChars < 0:
		return fmt.Errorf("tools.python.max_code_chars %d is negative (default %d)", p.MaxCodeChars, defaultPythonCode)
	case strings.ContainsAny(p.Command, " \t\n/") && !strings.HasPrefix(p.Command, "/"):
		return fmt.Errorf("tools.python.command %q must be a program name or an absolute path", p.Command)
	}
	return nil
}

// sandboxProgram is bubblewrap's executable.
const sandboxProgram = "bwrap"

// findSandbox returns bubblewrap's path, or an error saying how to get it.
func findSandbox() (string, error) {
	path, err := exec.LookPath(sandboxProgram)
	if err != nil {
		return "", errors.New("the python tool runs code in a bubblewrap sandbox, and bwrap was not found: install bubblewrap (apt-get install bubblewrap), or set tools.python.unsandboxed: true to run it without one")
	}
	return path, nil
}

type pythonArgs struct {
	Code string `json:"code"`
}

var pythonSchema = newSchema(map[string]property{
	"code": {
		Type:        "string",
		Description: "A complete Python 3 program. Print what you want to see: the result is the program's output.",
	},
}, "code")

// python runs programs the model writes.
type python struct {
	settings PythonSettings
	sandbox  string // bwrap's path; "" runs without one (tools.python.unsandboxed)
}

func newPython(opts Options) (tool, error) {
	p := &python{settings: opts.Python.withDefaults()}
	if !p.settings.Unsandboxed {
		path, err := findSandbox()
		if err != nil {
			return tool{}, err
		}
		p.sandbox = path
	}
	return tool{
		spec: agentSpec(pythonName,
			"Runs a Python 3 program and returns what it printed (standard output and errors) and its exit status. "+
				"There is no network, and the files it writes are gone after the run. "+
				"Use it for calculations, data handling and anything easier to compute than to guess.",
			pythonSchema),
		run: func(ctx context.Context, args string) (string, error) {
			var a pythonArgs
			if err := pythonSchema.decode(args, &a); err != nil {
				return "", err
			}
			return p.run(ctx, a.Code)
		},
	}, nil
}

func (p *python) run(ctx context.Context, code string) (string, error) {
	s := p.settings
	if strings.TrimSpace(code) == "" {
		return "", errors.New("code is empty")
	}
	if n := len([]rune(code)); n > s.MaxCodeChars {
		return "", fmt.Errorf("the program is %d characters long; at most %d (tools.python.max_code_chars)", n, s.MaxCodeChars)
	}
	work, err := os.MkdirTemp("", "koe-python-")
	if err != nil {
		return "", fmt.Errorf("no temporary directory: %w", err)
	}
	defer os.RemoveAll(work)

	// prlimit sets the resource limits for what it starts: CPU seconds,
	// address space, processes, and the size of any file written.
	limits := []string{
		// SIGXCPU at the limit, SIGKILL a second later.
		"--cpu=" + strconv.Itoa(s.CPUSeconds) + ":" + strconv.Itoa(s.CPUSeconds+1),
		"--as=" + strconv.Itoa(s.MemoryMB<<20),
		"--nproc=" + strconv.Itoa(pythonProcs),
		"--fsize=" + strconv.Itoa(s.MaxOutputBytes*16),
		"--core=0",
		"--",
	}
	var argv []string
	if p.sandbox != "" {
		argv = append([]string{"prlimit"}, limits...)
		argv = append(argv, p.sandbox,
			// New namespaces of every kind: no network (only a loopback
			// that is down), no view of other processes. No
			// --new-session: the run already has a session of its own
			// without a terminal (Setsid below), and bwrap's would take
			// the sandbox out of the process group that a cancel kills.
			"--unshare-all", "--die-with-parent",
			// The system read-only; merged /usr as Debian has it.
			"--ro-bind", "/usr", "/usr",
			"--symlink", "usr/lib", "/lib",
			"--symlink", "usr/lib64", "/lib64",
			"--symlink", "usr/bin", "/bin",
			"--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
			"--proc", "/proc", "--dev", "/dev",
			// The only writable place: this run's own directory.
			"--tmpfs", "/tmp",
			"--bind", work, "/work", "--chdir", "/work",
			"--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/work",
			"--setenv", "PYTHONDONTWRITEBYTECODE", "1",
			// The sandbox's own root, where the mount points were made,
			// read-only too.
			"--remount-ro", "/",
			s.Command, "-I", "-u", "-")
	} else {
		argv = append([]string{"prlimit"}, limits...)
		argv = append(argv, s.Command, "-I", "-u", "-")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = work
	if p.sandbox == "" {
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, "PYTHONDONTWRITEBYTECODE=1"}
	}
	cmd.Stdin = strings.NewReader(code)
	out := &capped{max: s.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own session and process group, without a controlling terminal
	// (nothing inside can open /dev/tty to type into koe's). Every process
	// of the run stays in that group, the sandbox's init included, so one
	// kill of the group ends the run whole, even while bwrap is still
	// setting up: bwrap's --die-with-parent alone misses a child it
	// cloned but had not yet armed. Pipes reach EOF only when the last
	// process holding them is gone, so Wait returns after all of them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A backstop only: should anything outlive the group, Wait gives up
	// on the output after this long rather than hold the turn.
	cmd.WaitDelay = pythonWaitDelay
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("could not start python: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return "", ctx.Err()
	}
	return p.report(out, waitErr, time.Since(started)), nil
}

// report is the run as the model reads it: what it printed, then how it
// ended when that was not a plain success.
// ran is how long the run took: a program stopped for its CPU time ran at
// least that long (the sandbox hides the program's own CPU usage).
func (p *python) report(out *capped, waitErr error, ran time.Duration) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(out.buf.String(), "\n"))
	if out.dropped > 0 {
		fmt.Fprintf(&b, "\n[output cut: %d more bytes (tools.python.max_output_bytes)]", out.dropped)
	}
	var exit *exec.ExitError
	switch {
	case waitErr == nil:
		if b.Len() == 0 {
			return "(the program printed nothing)"
		}
		return b.String()
	case errors.As(waitErr, &exit):
		// A signal ends the program directly (unsandboxed) or, in the
		// sandbox, shows as bubblewrap's exit status 128 + signal.
		sig := syscall.Signal(0)
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig = ws.Signal()
		} else if code := exit.ExitCode(); code > 128 && code < 128+65 {
			sig = syscall.Signal(code - 128)
		}
		switch sig {
		case 0:
			fmt.Fprintf(&b, "\n[exit status %d]", exit.ExitCode())
		case syscall.SIGXCPU, syscall.SIGKILL:
			if ran < time.Duration(p.settings.CPUSeconds)*time.Second {
				// Not its CPU time: the code exited with that status itself.
				fmt.Fprintf(&b, "\n[exit status %d]", exit.ExitCode())
				break
			}
			fmt.Fprintf(&b, "\n[stopped: it used its %d s of CPU time (tools.python.cpu_seconds)]", p.settings.CPUSeconds)
		default:
			fmt.Fprintf(&b, "\n[stopped by signal %s]", sig)
		}
		return strings.TrimLeft(b.String(), "\n")
	}
	fmt.Fprintf(&b, "\n[%v]", waitErr)
	return b.String()
}

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	max     int
	buf     bytes.Buffer
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
		return len(p), nil
	}
	if room > 0 {
		c.buf.Write(p[:room])
	}
	c.dropped += len(p) - max(room, 0)
	return len(p), nil
}
