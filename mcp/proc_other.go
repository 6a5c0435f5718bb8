//go:build !unix

package mcp

import (
	"os"
	"os/exec"
)

// Without Unix process groups, stopping a server stops the server itself,
// not what it started.
func ownGroup(*exec.Cmd) {}

func signalGroup(pid int, _ bool) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
