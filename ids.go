package koe

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"
)

// maxIDLen bounds ids so a client cannot make koe store or log huge keys.
const maxIDLen = 128

// uidTimeLayout matches the prefix Open-LLM-VTuber puts on history uids, which
// makes uids sort roughly by creation time and keeps the formats compatible.
const uidTimeLayout = "2006-01-02_15-04-05"

// NewHistoryUID returns a new history uid in the Open-LLM-VTuber format:
// the local creation time followed by 128 random bits, so uids never
// collide even when many histories are created in the same second.
func NewHistoryUID(now time.Time) string {
	var b [16]byte
	// Since Go 1.24 crypto/rand.Read never returns an error (the runtime
	// aborts if the OS cannot supply randomness), so there is nothing to handle.
	_, _ = rand.Read(b[:])
	return now.Format(uidTimeLayout) + "_" + hex.EncodeToString(b[:])
}

// ValidID reports whether id is safe to use as a conf uid, a history uid,
// a prompt name or a document id. Ids come from clients and, in other
// parts of koe and in Open-LLM-VTuber, double as file and directory
// names, so the allowed alphabet excludes path separators, leading dots
// (hidden files, "." and "..") and "..".
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > maxIDLen {
		return false
	}
	if id[0] == '.' || strings.Contains(id, "..") {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
