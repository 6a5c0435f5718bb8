package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const pythonName = "python"

// PythonSettings are the python tool's: off unless enabled, and then run
// in a bubblewrap sandbox with no network, no privilege, a read-only
// system, a bounded in-memory directory as its only writable place, and
// CPU time, memory, file, process and output limits.
type PythonSettings struct {
	// Command is the interpreter inside the sandbox (default python3).
	Command string `yaml:"command"`
	// Unsandboxed lets the tool run without bubblewrap, as koe's user
	// (tools.python.uid when koe is root), with only the resource limits.
	// Off by default: without it, the tool refuses to start where the
	// sandbox does not work.
	Unsandboxed bool `yaml:"unsandboxed"`
	// CPUSeconds, MemoryMB and MaxOutputBytes bound one run (0: 10 s,
	// 512 MB, 64 KB). MemoryMB is the whole run's: its files come out
	// of it (FilesMB, and a kilobyte for each of MaxFiles), and the rest
	// is the program's address space.
	CPUSeconds     int `yaml:"cpu_seconds"`
	MemoryMB       int `yaml:"memory_mb"`
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// MaxCodeChars bounds the program the model sends (0: 20000).
	MaxCodeChars int `yaml:"max_code_chars"`
	// FilesMB bounds what a run writes in /work, /tmp and /dev/shm
	// together, and MaxFiles how many files and folders it makes there
	// (0: 64 MB, 4096).
	FilesMB  int `yaml:"files_mb"`
	MaxFiles int `yaml:"max_files"`
	// MaxProcesses bounds a run's processes and threads, the sandbox's
	// own process included, and MaxOpenFiles the files each process may
	// have open (0: 64, 256).
	MaxProcesses int `yaml:"max_processes"`
	MaxOpenFiles int `yaml:"max_open_files"`
	// UID and GID are the host user and group runs take when koe runs as
	// root (0: 65534, nobody and nogroup on Debian). Otherwise runs take
	// koe's own.
	UID int `yaml:"uid"`
	GID int `yaml:"gid"`
}

// Defaults of PythonSettings.
const (
	defaultPythonCommand  = "python3"
	defaultPythonCPU      = 10
	defaultPythonMemoryMB = 512
	defaultPythonOutput   = 64 << 10
	defaultPythonCode     = 20000
	defaultPythonFilesMB  = 64
	defaultPythonFiles    = 4096
	defaultPythonProcs    = 64
	defaultPythonOpen     = 256
	defaultPythonUID      = 65534
	// minPythonAddressMB is the least address space python3 starts in.
	minPythonAddressMB = 32
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
	if p.FilesMB == 0 {
		p.FilesMB = defaultPythonFilesMB
	}
	if p.MaxFiles == 0 {
		p.MaxFiles = defaultPythonFiles
	}
	if p.MaxProcesses == 0 {
		p.MaxProcesses = defaultPythonProcs
	}
	if p.MaxOpenFiles == 0 {
		p.MaxOpenFiles = defaultPythonOpen
	}
	if p.UID == 0 {
		p.UID = defaultPythonUID
	}
	if p.GID == 0 {
		p.GID = defaultPythonUID
	}
	return p
}

// addressBytes is the program's address space: the run's memory less
// what its files may take.
func (p PythonSettings) addressBytes() int {
	return p.MemoryMB<<20 - p.FilesMB<<20 - p.MaxFiles<<10
}

func (p PythonSettings) check() error {
	d := p.withDefaults()
	switch {
	case p.CPUSeconds < 0 || p.CPUSeconds > 600:
		return fmt.Errorf("tools.python.cpu_seconds %d is out of range: 1 to 600 (default %d)", p.CPUSeconds, defaultPythonCPU)
	case p.MemoryMB < 0 || p.MemoryMB > 1<<20:
		return fmt.Errorf("tools.python.memory_mb %d is out of range: at most %d (default %d)", p.MemoryMB, 1<<20, defaultPythonMemoryMB)
	case p.MaxOutputBytes < 0:
		return fmt.Errorf("tools.python.max_output_bytes %d is negative (default %d)", p.MaxOutputBytes, defaultPythonOutput)
	case p.MaxCodeChars < 0:
		return fmt.Errorf("tools.python.max_code_chars %d is negative (default %d)", p.MaxCodeChars, defaultPythonCode)
	case p.FilesMB < 0 || p.FilesMB > 1<<20:
		return fmt.Errorf("tools.python.files_mb %d is out of range: 1 to %d (default %d)", p.FilesMB, 1<<20, defaultPythonFilesMB)
	case p.MaxFiles < 0 || p.MaxFiles > 1<<24:
		return fmt.Errorf("tools.python.max_files %d is out of range: 1 to %d (default %d)", p.MaxFiles, 1<<24, defaultPythonFiles)
	case d.addressBytes() < minPythonAddressMB<<20:
		return fmt.Errorf("tools.python.memory_mb %d leaves %d MB for the program once tools.python.files_mb (%d) and tools.python.max_files (%d, a kilobyte each) are taken: it needs at least %d",
			d.MemoryMB, d.addressBytes()>>20, d.FilesMB, d.MaxFiles, minPythonAddressMB)
	case p.MaxProcesses < 0 || p.MaxProcesses > 0 && p.MaxProcesses < 4 || p.MaxProcesses > 4096:
		return fmt.Errorf("tools.python.max_processes %d is out of range: 4 to 4096 (default %d)", p.MaxProcesses, defaultPythonProcs)
	case p.MaxOpenFiles < 0 || p.MaxOpenFiles > 0 && p.MaxOpenFiles < 16 || p.MaxOpenFiles > 1<<16:
		return fmt.Errorf("tools.python.max_open_files %d is out of range: 16 to %d (default %d)", p.MaxOpenFiles, 1<<16, defaultPythonOpen)
	case p.UID < 0 || p.UID > math.MaxUint32-1:
		return fmt.Errorf("tools.python.uid %d is out of range: 1 to %d (default %d)", p.UID, uint32(math.MaxUint32-1), defaultPythonUID)
	case p.GID < 0 || p.GID > math.MaxUint32-1:
		return fmt.Errorf("tools.python.gid %d is out of range: 1 to %d (default %d)", p.GID, uint32(math.MaxUint32-1), defaultPythonUID)
	case strings.ContainsAny(p.Command, " \t\n/") && !strings.HasPrefix(p.Command, "/"):
		return fmt.Errorf("tools.python.command %q must be a program name or an absolute path", p.Command)
	}
	return nil
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
	// uid and gid are the host ids runs take.
	uid, gid int
}

// descriptorsKept marks koe's descriptors once, before its first run.
var descriptorsKept sync.Once

func newPython(opts Options) (tool, error) {
	p, err := preparePython(opts.Python)
	if err != nil {
		return tool{}, err
	}
	if p.sandbox != "" {
		if err := p.probe(); err != nil {
			return tool{}, err
		}
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

// preparePython is the tool with its settings, not yet probed.
func preparePython(settings PythonSettings) (*python, error) {
	descriptorsKept.Do(keepDescriptorsFromRuns)
	s := settings.withDefaults()
	p := &python{settings: s, uid: os.Getuid(), gid: os.Getgid()}
	if os.Geteuid() == 0 {
		p.uid, p.gid = s.UID, s.GID
	}
	if s.Unsandboxed {
		return p, nil
	}
	if err := sandboxUnsupported(); err != nil {
		return nil, err
	}
	path, err := findSandbox()
	if err != nil {
		return nil, err
	}
	p.sandbox = path
	return p, nil
}

// run runs code and returns what the model reads of it; a run whose
// sandbox failed before the program ran is an error.
func (p *python) run(ctx context.Context, code string) (string, error) {
	s := p.settings
	if strings.TrimSpace(code) == "" {
		return "", errors.New("code is empty")
	}
	if n := len([]rune(code)); n > s.MaxCodeChars {
		return "", fmt.Errorf("the program is %d characters long; at most %d (tools.python.max_code_chars)", n, s.MaxCodeChars)
	}
	// Sandboxed, the run's files go to a tmpfs mounted over this
	// directory in the run's own mount namespace: on the host it stays
	// empty. Unsandboxed, the program writes in it.
	dir, err := os.MkdirTemp("", "koe-python-")
	if err != nil {
		return "", fmt.Errorf("no temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)

	program := []string{s.Command, "-I", "-u", "-"}
	var cmd *exec.Cmd
	var pipes *sandboxPipes
	if p.sandbox != "" {
		cmd = p.sandboxCommand(dir, program)
		if pipes, err = openSandboxPipes(); err != nil {
			return "", fmt.Errorf("could not start python: %w", err)
		}
		defer pipes.close()
		cmd.ExtraFiles = pipes.childEnds()
	} else {
		if err := os.Chown(dir, p.uid, p.gid); err != nil {
			return "", fmt.Errorf("could not start python: %w", err)
		}
		cmd = exec.Command("prlimit", append(p.limits(), program...)...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + sandboxPath, "HOME=" + dir, "PYTHONDONTWRITEBYTECODE=1"}
		cmd.SysProcAttr = unsandboxedAttr(p.uid, p.gid)
	}
	cmd.Stdin = strings.NewReader(code)
	out := &capped{max: s.MaxOutputBytes}
	cmd.Stdout, cmd.Stderr = out, out
	// A backstop only: every process of the run is in its process group
	// (see sandboxAttr), and pipes reach EOF when the last of them is
	// gone; should anything outlive the group, Wait gives up on the
	// output after this long rather than hold the turn.
	cmd.WaitDelay = pythonWaitDelay
	started := time.Now()
	err = cmd.Start()
	if pipes != nil {
		pipes.started()
	}
	if err != nil {
		if pipes != nil {
			return "", fmt.Errorf("could not start the python sandbox: %w", err)
		}
		return "", fmt.Errorf("could not start python: %w", err)
	}
	statusc := make(chan sandboxStatus, 1)
	if pipes != nil {
		go func() { statusc <- readSandboxStatus(pipes.status) }()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		// The status reader ends when pipes.close closes its pipe.
		return "", ctx.Err()
	}
	ran := time.Since(started)
	if pipes == nil {
		return p.report(out, exitOf(cmd.ProcessState), ran), nil
	}
	// bwrap has written all it will; a process that kept the descriptor
	// would have to have left the group, and WaitDelay bounds that case.
	_ = pipes.status.SetReadDeadline(time.Now().Add(pythonWaitDelay))
	st := <-statusc
	if !st.ran {
		return "", &sandboxFailure{said: strings.TrimSpace(out.buf.String()), err: waitErr}
	}
	return p.report(out, st.exitCode, ran), nil
}

// limits are prlimit's options up to the program it starts: CPU seconds,
// address space, processes, open files, and the size of any file
// written.
func (p *python) limits() []string {
	s := p.settings
	return []string{
		// SIGXCPU at the limit, SIGKILL a second later.
		"--cpu=" + strconv.Itoa(s.CPUSeconds) + ":" + strconv.Itoa(s.CPUSeconds+1),
		"--as=" + strconv.Itoa(s.addressBytes()),
		"--nproc=" + strconv.Itoa(s.MaxProcesses),
		"--nofile=" + strconv.Itoa(s.MaxOpenFiles),
		"--fsize=" + strconv.Itoa(s.FilesMB<<20),
		"--core=0",
		"--"}
}

// exitOf is the exit status of an unsandboxed run as a shell shows it:
// 128 + the signal for one that a signal ended.
func exitOf(state *os.ProcessState) int {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}

// report is the run as the model reads it: what it printed, then how it
// ended when that was not a plain success, and which limit it met when
// its output shows one.
// ran is how long the run took: a program stopped for its CPU time ran at
// least that long (the status alone does not tell the limit's kill from
// the program's own exit status 137).
func (p *python) report(out *capped, exitCode int, ran time.Duration) string {
	s := p.settings
	var b strings.Builder
	b.WriteString(strings.TrimRight(out.buf.String(), "\n"))
	if out.dropped > 0 {
		fmt.Fprintf(&b, "\n[output cut: %d more bytes (tools.python.max_output_bytes)]", out.dropped)
	}
	for _, n := range limitNotes {
		shown := func(text string) bool { return bytes.Contains(out.buf.Bytes(), []byte(text)) }
		if slices.ContainsFunc(n.shows, shown) {
			b.WriteString("\n[" + n.note(s) + "]")
		}
	}
	if exitCode == 0 {
		if b.Len() == 0 {
			return "(the program printed nothing)"
		}
		return b.String()
	}
	sig := syscall.Signal(0)
	if exitCode > 128 && exitCode < 128+65 {
		sig = syscall.Signal(exitCode - 128)
	}
	switch {
	case sig == 0:
		fmt.Fprintf(&b, "\n[exit status %d]", exitCode)
	case sig == syscall.SIGXCPU || sig == syscall.SIGKILL:
		if ran < time.Duration(s.CPUSeconds)*time.Second {
			// Not its CPU time: the code exited with that status itself.
			fmt.Fprintf(&b, "\n[exit status %d]", exitCode)
			break
		}
		fmt.Fprintf(&b, "\n[stopped: it used its %d s of CPU time (tools.python.cpu_seconds)]", s.CPUSeconds)
	default:
		fmt.Fprintf(&b, "\n[stopped by signal %s]", sig)
	}
	return strings.TrimLeft(b.String(), "\n")
}

// limitNotes name the setting behind an error the output shows: the
// kernel's error says what ran out, not which of koe's keys bounds it.
var limitNotes = []struct {
	shows []string
	note  func(PythonSettings) string
}{
	{[]string{"MemoryError"}, func(s PythonSettings) string {
		return fmt.Sprintf("memory: %d MB per run, its files' share included (tools.python.memory_mb)", s.MemoryMB)
	}},
	{[]string{"No space left on device"}, func(s PythonSettings) string {
		return fmt.Sprintf("files: %d MB and %d files per run in /work, /tmp and /dev/shm together (tools.python.files_mb, tools.python.max_files)", s.FilesMB, s.MaxFiles)
	}},
	{[]string{"File too large"}, func(s PythonSettings) string {
		return fmt.Sprintf("files: %d MB per file (tools.python.files_mb)", s.FilesMB)
	}},
	{[]string{"Resource temporarily unavailable", "can't start new thread"}, func(s PythonSettings) string {
		return fmt.Sprintf("processes and threads: %d per run (tools.python.max_processes)", s.MaxProcesses)
	}},
	{[]string{"Too many open files"}, func(s PythonSettings) string {
		return fmt.Sprintf("open files: %d per process (tools.python.max_open_files)", s.MaxOpenFiles)
	}},
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
