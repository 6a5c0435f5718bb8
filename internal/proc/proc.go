// Package proc runs the helper programs koe's engines are built on
// (espeak-ng, pocketsphinx_continuous) so that a cancel stops everything
// they started, not only the program itself.
package proc

import (
	"context"
	"os/exec"
)

// Command is exec.CommandContext, except that where the system has process
// groups (Unix) the command runs in a group of its own and a cancel kills
// that whole group. Killing only the direct child would leave anything it
// forked (a wrapper script's real engine, say) running and holding the
// output pipes open, so Wait would block until WaitDelay.
func Command(ctx context.Context, name string, arg ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, arg...)
	killGroupOnCancel(cmd)
	return cmd
}
