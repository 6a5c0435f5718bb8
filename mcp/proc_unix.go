//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// ownGroup runs a stdio server in a process group of its own, so that
// what it starts (npx's node, uvx's python) can be stopped with it, and a
// Ctrl-C in koe's terminal reaches koe only, which then stops the servers
// in order.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup asks a server's group to stop (SIGTERM), or kills it. The
// group's id is the server's pid, which stays reserved while anything in
// the group lives, even after the server itself was waited for; an empty
// group is ESRCH, nothing to do.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pgid, sig)
}
