//go:build unix

package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// killGroupOnCancel puts cmd in a process group of its own (Setpgid) and
// makes a cancel kill the group; see Command for why.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// With Setpgid the group's id is the child's pid. If the child
		// has already exited, the group is either gone (ESRCH: nothing
		// left to stop) or holds what it left behind, which is exactly
		// what must not survive.
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}
