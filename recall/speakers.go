package recall

import "koe/textindex"

// A question about a person ("What martial arts has John done?") names
// them, and the keyword index reads the name as a word. It matches the
// messages that say it: mostly the other speaker's "Hey John!" and "Wow,
// John…", which say nothing of what John did, while John's own messages,
// the ones asked about, seldom hold his own name. Ranking.Named already
// lifts what the person said. In a small block the name's word still
// pays: the other speaker's "John, your family is so kind" stands next to
// John's own line and lends it its score. In a large block it costs: the
// greetings and their neighbours take the room the person's messages on
// the subject would fill. So from Ranking.SpeakerFrom tokens up the first
// round looks for the question's other words only. Sessions are still
// scored by every word (coverage), and the second round's seeds still
// leave the name out, as they leave out every word of the question.

// withoutSpeakers returns terms without the terms of the speakers'
// names among the question's words (named), or terms itself if nothing
// else would be left.
func withoutSpeakers(terms []string, named map[string]bool) []string {
	if len(named) == 0 {
		return terms
	}
	drop := make(map[string]bool, len(named))
	for w := range named {
		for _, t := range textindex.Terms(w) {
			drop[t] = true
		}
	}
	kept := make([]string, 0, len(terms))
	for _, t := range terms {
		if !drop[t] {
			kept = append(kept, t)
		}
	}
	if len(kept) == 0 {
		// "Tell me about John": the name is all there is to look for.
		return terms
	}
	return kept
}
