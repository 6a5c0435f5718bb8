package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

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

// How a sandboxed run is built, from koe outward in:
//
//  1. koe starts /bin/sh in a new user and mount namespace of its own (ns1)
//     where it is root, mapped to one unprivileged host user: koe's own, or
//     tools.python.uid when koe is root. Nothing of the run is ever host
//     root, and its capabilities are those of ns1's root, over ns1 only.
//  2. sh mounts one tmpfs for the run's files, bounded in bytes and in
//     files (bubblewrap's own --size bounds bytes only, and a million empty
//     files cost a gigabyte of kernel memory), then execs prlimit.
//  3. prlimit sets the run's resource limits and execs bwrap.
//  4. bwrap makes the sandbox: a second user namespace (ns2) where the
//     program is uid 65534 with no capability at all, no_new_privs, no way
//     to make further user namespaces, new pid, network, ipc and uts
//     namespaces, a read-only system, the tmpfs as /work, /tmp and
//     /dev/shm, a system call filter (deniedSyscalls), and an environment
//     of its own. The program runs as the namespace's pid 1 (--as-pid-1):
//     there is no other process in there to ptrace (bwrap's own init, with
//     none of the limits, would be one), and when it ends the kernel ends
//     everything it left.
//
// Why the process limit counts one run only: RLIMIT_NPROC is checked at
// every user namespace level up to the host, each level against the limit
// its namespace inherited when it was made. The limit is set in ns1,
// which is this run's alone, so the levels up to ns1 count this run's
// processes only; the host level counts all the user's processes against
// the limit koe had when it made ns1 (none for root). Set on bwrap in
// koe's namespace instead, as this tool once did, it counted every
// process of koe's user, koe's own threads included, and concurrent runs
// failed to start; and host root is exempt from it. So concurrent runs may
// share one host user: nothing else that user has would tell them apart,
// each having its own pid, ipc, network and mount namespaces.
//
// The run's files live in memory, so they are part of its memory budget:
// the address space limit is tools.python.memory_mb less the tmpfs's
// bytes and a kilobyte for each file it may hold.

// sandboxSetup is the script sh runs in ns1: $1 is the mount point, $2 and
// $3 the tmpfs's bytes and files, the rest the command to become. The
// tmpfs holds the directories bwrap binds in and counts them among its
// files.
const sandboxSetup = `set -e
unset PWD OLDPWD
mount -t tmpfs -o "size=$2,nr_inodes=$3,mode=0755" koe-python "$1"
mkdir "$1/work" "$1/tmp" "$1/shm"
shift 3
exec "$@"`

// sandboxDirs is how many files of the tmpfs its own directories take.
const sandboxDirs = 4

// sandboxPath is the program's PATH.
const sandboxPath = "/usr/bin:/bin"

// sandboxUID is the program's user inside the sandbox (nobody).
const sandboxUID = "65534"

// The descriptors bwrap writes its status to and reads its system call
// filter from: exec.Cmd's ExtraFiles, in this order.
const (
	sandboxStatusFD = "3"
	sandboxFilterFD = "4"
)

// sandboxCommand is the command that runs program in the sandbox, with
// its files on a tmpfs mounted over mountPoint (an empty directory that
// stays empty on the host) and under the limits.
func (p *python) sandboxCommand(mountPoint string, program []string) *exec.Cmd {
	s := p.settings
	args := []string{"-c", sandboxSetup, "sh",
		mountPoint, strconv.Itoa(s.FilesMB << 20), strconv.Itoa(s.MaxFiles + sandboxDirs)}
	args = append(args, "prlimit")
	args = append(args, p.limits()...)
	args = append(args, p.sandbox,
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--uid", sandboxUID, "--gid", sandboxUID, "--cap-drop", "ALL",
		// No --new-session: the run already has a session of its own
		// without a terminal (Setsid), and bwrap's would take the sandbox
		// out of the process group that a cancel kills.
		"--as-pid-1", "--die-with-parent",
		"--json-status-fd", sandboxStatusFD,
		"--seccomp", sandboxFilterFD,
		// The system read-only; merged /usr as Debian has it.
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64",
		"--symlink", "usr/bin", "/bin",
		"--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
		"--proc", "/proc", "--dev", "/dev",
		// The only writable places, all on the run's bounded tmpfs.
		"--bind", mountPoint+"/work", "/work",
		"--bind", mountPoint+"/tmp", "/tmp",
		"--bind", mountPoint+"/shm", "/dev/shm",
		"--remount-ro", "/dev",
		"--chdir", "/work",
		"--clearenv", "--setenv", "PATH", sandboxPath, "--setenv", "HOME", "/work",
		"--setenv", "PYTHONDONTWRITEBYTECODE", "1",
		// The sandbox's own root, where the mount points were made,
		// read-only too.
		"--remount-ro", "/",
		"--")
	args = append(args, program...)
	cmd := exec.Command("/bin/sh", args...)
	// Not koe's environment, which holds its keys: bwrap and what builds
	// the sandbox get a PATH (mount may live in sbin) and nothing else,
	// and the program what bwrap sets.
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = sandboxAttr(p.uid, p.gid)
	return cmd
}

// unsandboxedAttr starts an unsandboxed run (tools.python.unsandboxed)
// in its own session, as sandboxAttr does, and never as root.
func unsandboxedAttr(uid, gid int) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setsid: true}
	if os.Geteuid() == 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	return attr
}

// sandboxPipes are what a sandboxed run shares with bwrap besides its
// output: the status bwrap writes and the system call filter it reads.
type sandboxPipes struct {
	status      *os.File // koe's end of the status
	childStatus *os.File
	childFilter *os.File
}

func openSandboxPipes() (*sandboxPipes, error) {
	status, childStatus, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	filter, filterW, err := os.Pipe()
	if err != nil {
		status.Close()
		childStatus.Close()
		return nil, err
	}
	// A few hundred bytes: the pipe holds them without a reader.
	_, err = filterW.Write(seccompFilter())
	filterW.Close()
	if err != nil {
		status.Close()
		childStatus.Close()
		filter.Close()
		return nil, err
	}
	return &sandboxPipes{status: status, childStatus: childStatus, childFilter: filter}, nil
}

// childEnds are the descriptors the run's command gets, in the order of
// sandboxStatusFD and sandboxFilterFD.
func (p *sandboxPipes) childEnds() []*os.File { return []*os.File{p.childStatus, p.childFilter} }

// started closes koe's copies of the child's ends, so that the status
// ends when bwrap does.
func (p *sandboxPipes) started() {
	p.childStatus.Close()
	p.childFilter.Close()
}

func (p *sandboxPipes) close() {
	p.started()
	p.status.Close()
}

// sandboxStatus is what bwrap said of the run on its status descriptor.
type sandboxStatus struct {
	// ran is whether the program ran: bwrap reports an exit code only
	// for the command it started, not for its own failures.
	ran      bool
	exitCode int
}

// maxStatusBytes bounds what is read of bwrap's status: two short JSON
// documents.
const maxStatusBytes = 16 << 10

// readSandboxStatus reads bwrap's status documents until r ends.
func readSandboxStatus(r io.Reader) sandboxStatus {
	var st sandboxStatus
	dec := json.NewDecoder(io.LimitReader(r, maxStatusBytes))
	for {
		var doc struct {
			ExitCode *int `json:"exit-code"`
		}
		if err := dec.Decode(&doc); err != nil {
			return st
		}
		if doc.ExitCode != nil {
			st.ran, st.exitCode = true, *doc.ExitCode
		}
	}
}

// sandboxFailure is a run whose sandbox failed: bwrap did not report the
// program's end, most often because it could not start it.
type sandboxFailure struct {
	said string // what the run printed: the failing command's complaint
	err  error  // how the outermost command ended
}

func (f *sandboxFailure) Error() string {
	if f.said == "" {
		return fmt.Sprintf("the python sandbox failed (%v)", f.err)
	}
	return fmt.Sprintf("the python sandbox failed: %s", f.said)
}
