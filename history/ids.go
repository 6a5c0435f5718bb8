package history

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"koe/internal/quote"
)

// maxIDLen bounds ids so a client cannot make us store or log huge keys.
const maxIDLen = 128

// maxQuotedIDLen bounds how much of a rejected id is echoed back in errors;
// rejected ids are attacker-controlled and end up in logs.
const maxQuotedIDLen = 64

// uidTimeLayout matches the prefix Open-LLM-VTuber puts on history uids, which
// makes uids sort roughly by creation time and keeps the formats compatible.
const uidTimeLayout = "2006-01-02_15-04-05"

// NewUID returns a new history uid in the Open-LLM-VTuber format: the local
// creation time followed by 128 random bits, so uids never collide even when
// many histories are created in the same second.
func NewUID(now time.Time) string {
	var b [16]byte
	// Since Go 1.24 crypto/rand.Read never returns an error (the runtime
	// aborts if the OS cannot supply randomness), so there is nothing to handle.
	_, _ = rand.Read(b[:])
	return now.Format(uidTimeLayout) + "_" + hex.EncodeToString(b[:])
}

// ValidID reports whether id is safe to use as a conf uid or history uid.
// Ids come from clients and, in other parts of koe and in Open-LLM-VTuber,
// double as file and directory names, so the allowed alphabet excludes path
// separators, leading dots (hidden files, "." and "..") and "..".
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

// checkIDs validates ids in order and reports the first bad one. kind names
// which id it was so callers can tell a bad conf uid from a bad history uid.
func checkIDs(ids ...idArg) error {
	for _, a := range ids {
		if !ValidID(a.id) {
			return fmt.Errorf("%s %q: %w", a.kind, truncateID(a.id), ErrInvalidID)
		}
	}
	return nil
}

type idArg struct {
	kind string
	id   string
}

func confID(id string) idArg     { return idArg{kind: "conf uid", id: id} }
func historyID(id string) idArg  { return idArg{kind: "history uid", id: id} }
func promptName(id string) idArg { return idArg{kind: "prompt name", id: id} }

func truncateID(id string) string { return quote.Shorten(id, maxQuotedIDLen) }
