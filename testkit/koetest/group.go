package koetest

import (
	"regexp"

	"koe/testkit/fakellm"
)

// groupSelf finds the speaking character in koe's group prompt (the end
// of the system prompt of a character's turn in a round).
var groupSelf = regexp.MustCompile(`You are (\w+), talking in a group conversation`)

// GroupSpeaker is the character a request's group prompt says is
// speaking; "" when the request is no group turn's. A fake LLM answers
// as that character with it.
func GroupSpeaker(req fakellm.Request) string {
	for _, m := range req.Messages {
		if m.Role == "system" {
			if g := groupSelf.FindStringSubmatch(m.Content); g != nil {
				return g[1]
			}
		}
	}
	return ""
}
