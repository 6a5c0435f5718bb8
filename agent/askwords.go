package agent

import (
	"strings"
	"unicode"
)

// How the user's words answer a question. Rules first: a spoken "yes",
// "no", "never mind" or "cancel" needs no model.

var (
	// cancelWords end a question without a choice (MCP's cancel).
	cancelWords = []string{"cancel", "stop", "abort", "quit", "forget it", "forget about it"}
	// declineWords refuse (MCP's decline).
	declineWords = []string{"no", "nope", "nah", "never mind", "nevermind", "no thanks", "no thank you",
		"don't", "dont", "do not", "decline", "skip", "not now", "rather not", "i'd rather not", "i would rather not", "deny", "refuse"}
	// yesWords allow.
	yesWords = []string{"yes", "yeah", "yep", "yup", "sure", "ok", "okay", "go ahead", "do it", "please do",
		"confirm", "confirmed", "allow", "of course", "alright", "all right", "affirmative", "y", "true"}
	// falseWords are a boolean's "no" besides declineWords.
	falseWords = []string{"false", "n"}
)

// words normalises an answer for the rules: lower case, letters, digits
// and apostrophes, single spaces.
func words(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '’' {
			if r == '’' {
				r = '\''
			}
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
			continue
		}
		space = true
	}
	return b.String()
}

// startsWithAny reports whether the normalised answer is one of phrases,
// or begins with one as whole words ("no thanks", "yes please", "cancel
// that").
func startsWithAny(w string, phrases []string) bool {
	for _, p := range phrases {
		if w == p || strings.HasPrefix(w, p+" ") {
			return true
		}
	}
	return false
}

// confirmAction reads a confirmation's answer: only a clear yes allows;
// anything else declines (or cancels, said so).
func confirmAction(text string) string {
	w := words(text)
	switch {
	case startsWithAny(w, cancelWords):
		return Cancel
	case startsWithAny(w, declineWords):
		return Decline
	case startsWithAny(w, yesWords):
		return Accept
	}
	return Decline
}
