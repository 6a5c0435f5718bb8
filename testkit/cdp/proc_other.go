//go:build !unix

package cdp

import (
	"os/exec"
	"time"
)

func setProcessGroup(*exec.Cmd) {}

func kill(cmd *exec.Cmd, _ []int) { _ = cmd.Process.Kill() }

func waitGone(*exec.Cmd, []int, time.Duration) {}
