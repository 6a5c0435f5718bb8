//go:build linux && (amd64 || arm64 || riscv64)

package tools

import (
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sandboxAttr starts the run in ns1, root there and uid:gid on the host.
// Its own session and process group, without a controlling terminal
// (nothing inside can open /dev/tty to type into koe's): every process of
// the run stays in that group, so one kill of the group ends the run
// whole, even while bwrap is still setting up.
func sandboxAttr(uid, gid int) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{
		Setsid:      true,
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
	}
	if os.Geteuid() == 0 {
		// Until it calls setuid, the child is still host root, now
		// unmapped in ns1: taking ns1's root there makes it uid on the
		// host, and dropping root's supplementary groups leaves it no
		// group of root's either.
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	return attr
}

// deniedSyscalls fail with EPERM in the sandbox. The SysV IPC objects
// and memory files they make are memory that neither the address space
// limit nor the files' tmpfs counts, and that outlives the process that
// made it; keyrings are not confined by any of the sandbox's namespaces.
// Python's own multiprocessing needs none of them: its semaphores and
// shared memory are files in /dev/shm.
var deniedSyscalls = []uint32{
	unix.SYS_SHMGET, unix.SYS_MSGGET, unix.SYS_SEMGET,
	unix.SYS_MEMFD_CREATE, unix.SYS_MEMFD_SECRET,
	unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL,
}

// auditArch is the architecture seccomp reports for this build's
// system calls; any other, such as 32-bit calls from a 64-bit process,
// is refused whole.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	default:
		return unix.AUDIT_ARCH_RISCV64
	}
}

// x32Bit marks the system call numbers of amd64's x32 ABI, which share
// the 64-bit architecture's audit value.
const x32Bit = 0x40000000

// seccompFilter is the sandbox's system call filter as bwrap's --seccomp
// reads it: a classic BPF program, in the machine's byte order.
func seccompFilter() []byte {
	const (
		load        = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		ifEqual     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ifAtOrAbove = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret         = unix.BPF_RET | unix.BPF_K
		// Offsets in struct seccomp_data.
		nrOffset   = 0
		archOffset = 4
	)
	checks := len(deniedSyscalls)
	if runtime.GOARCH == "amd64" {
		checks++
	}
	// The program: load the arch, refuse a foreign one, load the number,
	// refuse each denied one, allow the rest. Jumps count the
	// instructions they skip; the refusal is the last instruction.
	last := 3 + checks + 1
	toDeny := func(at int) uint8 { return uint8(last - at - 1) }
	prog := []unix.SockFilter{
		{Code: load, K: archOffset},
		{Code: ifEqual, K: auditArch(), Jt: 0, Jf: toDeny(1)},
		{Code: load, K: nrOffset},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, unix.SockFilter{Code: ifAtOrAbove, K: x32Bit, Jt: toDeny(len(prog))})
	}
	for _, nr := range deniedSyscalls {
		prog = append(prog, unix.SockFilter{Code: ifEqual, K: nr, Jt: toDeny(len(prog))})
	}
	prog = append(prog,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)})
	b := make([]byte, 0, 8*len(prog))
	for _, f := range prog {
		b = binary.NativeEndian.AppendUint16(b, f.Code)
		b = append(b, f.Jt, f.Jf)
		b = binary.NativeEndian.AppendUint32(b, f.K)
	}
	return b
}

// sandboxUnsupported says why this system cannot run the sandbox; nil
// here.
func sandboxUnsupported() error { return nil }

// keepDescriptorsFromRuns marks every descriptor koe holds close-on-exec,
// so that runs get their pipes and nothing else: bwrap hands its command
// whatever it inherited, and koe may have inherited descriptors from
// whatever started it. koe's own are close-on-exec already, and a
// descriptor meant for a child is given to it with exec.Cmd, which
// duplicates it without the flag.
func keepDescriptorsFromRuns() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
