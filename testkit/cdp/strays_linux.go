package cdp

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// strays lists the processes other than the browser's own group whose
// command line mentions marker (the unique profile directory). Chromium's
// crashpad handlers put themselves in a session of their own, so killing
// the browser's process group misses them, and they linger for seconds
// while writing into the profile directory.
func strays(marker string, pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
			continue // killed with the group
		}
		out = append(out, pid)
	}
	return out
}
