//go:build !(linux && (amd64 || arm64 || riscv64))

package tools

import (
	"errors"
	"syscall"
)

// sandboxAttr keeps the run in a session of its own; the sandbox itself
// needs Linux (sandboxUnsupported).
func sandboxAttr(uid, gid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

func seccompFilter() []byte { return nil }

// sandboxUnsupported says why this system cannot run the sandbox.
func sandboxUnsupported() error {
	return errors.New("the python tool's sandbox needs Linux on amd64, arm64 or riscv64 (user namespaces and a system call filter for them); set tools.python.unsandboxed: true to run it without one")
}

func keepDescriptorsFromRuns() {}
