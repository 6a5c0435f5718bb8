package loadrun

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Usage is what /proc says about a process.
type Usage struct {
	RSS, HWM int64 // KiB: resident now (VmRSS) and at the peak (VmHWM)
	// Anon and File split RSS (KiB): memory of the process's own, and
	// pages of mapped files (koe's database) that are resident.
	Anon, File int64
	CPU        time.Duration // user + system time so far
}

// ReadUsage reads VmRSS, VmHWM (peak RSS) and CPU time of pid from /proc.
// Fields it cannot read stay zero.
func ReadUsage(pid int) Usage {
	var m Usage
	if pid <= 0 {
		return m
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the parenthesised command name; utime and stime
		// are the 14th and 15th fields, in clock ticks (100 per second
		// on Linux).
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			f := strings.Fields(string(stat)[i+1:])
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				s, _ := strconv.ParseInt(f[12], 10, 64)
				m.CPU = time.Duration(u+s) * 10 * time.Millisecond
			}
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.RSS = v
		case "VmHWM:":
			m.HWM = v
		case "RssAnon:":
			m.Anon = v
		case "RssFile:":
			m.File = v
		}
	}
	return m
}

// ResetPeak sets pid's VmHWM back to its current RSS, so that the next
// ReadUsage reports the peak of what happened since.
func ResetPeak(pid int) error {
	// "5" resets the peak resident set size (Linux 4.0 and later).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS: %w", err)
	}
	return nil
}

// IsLoopback reports whether the URL or address raw names this machine:
// localhost or a loopback IP address.
func IsLoopback(raw string) bool {
	host := raw
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	host, _, _ = strings.Cut(host, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
