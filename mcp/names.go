package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxToolName is the longest function name OpenAI-compatible APIs take.
const maxToolName = 64

// separator joins a server's name and its tool's.
const separator = "__"

// toolName is the name the model sees for a server's tool: server, "__",
// and the tool's own name when it already fits the function-name rules
// ([A-Za-z0-9_-], at most 64 characters in all) and does not start with
// "_". Otherwise the tool part is the name made to fit and a hash of the
// original, so that two tools whose names differ only in what was made to
// fit still differ. With the server names Validate allows, the first "__"
// is the separator, so names of different servers never collide; within a
// server, a collision left (a tool literally named like another's hashed
// form) is found when its tools are listed.
func toolName(server, tool string) string {
	room := maxToolName - len(server) - len(separator)
	if len(tool) <= room && fitsFunctionName(tool) && !strings.HasPrefix(tool, "_") {
		return server + separator + tool
	}
	sum := sha256.Sum256([]byte(tool))
	hash := hex.EncodeToString(sum[:4])
	var b strings.Builder
	for _, r := range tool {
		if isNameChar(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	clean := strings.TrimLeft(b.String(), "_")
	if keep := room - len(hash) - 1; len(clean) > keep {
		clean = clean[:keep]
	}
	if clean == "" {
		return server + separator + hash
	}
	return server + separator + clean + "_" + hash
}

// serverOf returns the server part of a name toolName made.
func serverOf(name string) (string, bool) {
	server, _, ok := strings.Cut(name, separator)
	return server, ok
}

func fitsFunctionName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !isNameChar(r) {
			return false
		}
	}
	return true
}

func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}
