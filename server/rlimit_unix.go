//go:build unix

package server

import (
	"fmt"
	"syscall"
)

// openFileLimit returns the soft and hard RLIMIT_NOFILE after raising the
// soft limit to the hard one. Go (1.19 on) already raises it when the
// process starts; doing it again costs nothing and covers a limit lowered
// since.
func openFileLimit() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	return uint64(lim.Cur), uint64(lim.Max), nil
}
