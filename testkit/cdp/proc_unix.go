//go:build unix

package cdp

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// setProcessGroup puts the browser in a process group of its own so that
// Close can kill its renderer, GPU and zygote helpers along with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// kill kills the browser's process group (whose id is the browser's pid,
// by Setpgid) and the strays, processes that left the group.
func kill(cmd *exec.Cmd, strays []int) {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		_ = cmd.Process.Kill()
	}
	for _, pid := range strays {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// waitGone waits, at most max, until the killed processes have gone, so
// that none still writes into the profile directory when the caller
// removes it. Killed helpers are reparented and reaped by init; an init
// that does not reap leaves zombies, which write nothing, hence the bound.
func waitGone(cmd *exec.Cmd, strays []int, max time.Duration) {
	alive := func(pid int) bool { return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		left := alive(-cmd.Process.Pid)
		for _, pid := range strays {
			left = left || alive(pid)
		}
		if !left {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
