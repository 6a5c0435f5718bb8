//go:build unix

package server

import (
	"fmt"
	"syscall"
)

// openFileLimit returns the soft and hard RLIMIT_NOFILE. It does not raise
// the soft limit: the Go runtime has done so before main (to the hard limit
// less one, since Go 1.19), and it gives child processes such as espeak-ng
// the original limit back only as long as nobody calls Setrlimit.
func openFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}
