//go:build !unix

package proc

import "os/exec"

// killGroupOnCancel keeps exec.CommandContext's default on systems without
// Unix process groups: a cancel kills the direct child.
func killGroupOnCancel(*exec.Cmd) {}
