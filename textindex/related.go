package textindex

// Related terms widen a query: a manual says "bytes" where its reader asks
// about "sizes", "exit" where they ask how to "leave", "deferred" where
// they want to "postpone". BM25 matches words, not meanings, so such a
// question misses its passage however good the ranking. A small built-in
// table of words that technical English uses for one another closes part
// of that gap with no model: Score adds a query term's related terms at a
// lower weight (Params.Related), so a passage using the reader's own words
// still ranks first and one using the manual's words is found at all.
//
// The irregular forms are the other part: the stemmer makes "writes" and
// "writing" one term but leaves "wrote" and "written" apart from "write",
// "left" apart from "leave". They are widened at full weight, being the
// same word.
//
// The table is deliberately short and general: each group is words an
// English manual and its readers use for one thing. A word in several
// groups gets the related terms of all of them. Entries are plain words;
// they are analysed like any text when the package loads.

// relatedGroups are synonyms and near-synonyms of technical English.
var relatedGroups = [][]string{
	// quantities and measures
	{"size", "byte", "large", "big", "length", "magnitude"},
	{"limit", "maximum", "max", "most", "exceed", "cap", "ceiling"},
	{"minimum", "min", "least", "floor"},
	{"number", "integer", "count", "amount"},
	{"fast", "quick", "speed", "rapid"},
	{"slow", "delay", "latency", "sluggish"},
	// storage
	{"disk", "storage", "drive", "persistent"},
	{"store", "save", "keep", "persist", "retain", "record"},
	{"file", "filesystem", "document"},
	// actions on things
	{"delete", "remove", "erase", "drop", "discard", "purge"},
	{"create", "make", "build", "generate"},
	{"add", "insert", "append", "include"},
	{"change", "modify", "alter", "edit", "update", "adjust"},
	{"start", "begin", "launch", "initiate"},
	{"enable", "activate", "switch", "turn"},
	{"disable", "deactivate", "suppress"},
	{"stop", "end", "terminate", "quit", "exit", "leave", "halt", "finish"},
	{"postpone", "defer", "delay", "later"},
	{"fix", "repair", "recover", "restore", "salvage", "rescue", "mend"},
	{"merge", "combine", "join", "patch", "union"},
	{"find", "search", "locate", "lookup"},
	{"print", "output", "display", "show"},
	{"pass", "give", "specify", "supply", "provide"},
	{"check", "verify", "enforce", "validate", "constraint"},
	{"allow", "permit", "let"},
	{"need", "require", "necessary", "mandatory"},
	{"follow", "implement", "conform", "comply"},
	// states
	{"damage", "corrupt", "broken", "break", "faulty"},
	{"error", "fault", "failure", "fail", "problem", "wrong"},
	{"default", "initial", "initially", "unchanged", "standard"},
	{"difference", "differ", "separate", "distinguish", "versus"},
	{"sort", "order", "arrange"},
	// things
	{"machine", "computer", "host", "server", "network", "remote"},
	{"nfs", "network", "filesystem"},
	{"clock", "time", "hour"},
	{"calendar", "date", "day"},
	{"guide", "manual", "documentation", "section", "chapter"},
	{"standard", "specification", "rfc"},
	{"reference", "foreign", "parent", "child"},
	{"version", "revision", "release"},
}

// irregularForms are English words whose inflections the stemmer leaves
// apart from the base form: the base form first, then its other forms.
// Forms that are also another common word of manuals are left out: "left"
// (a side), "saw" and "axes" (tools), "led" (a lamp), "felt", "rose", and
// forms that stem onto another word ("leaves" onto "leave", "indices"
// onto "indicate").
var irregularForms = [][]string{
	{"begin", "began", "begun"},
	{"break", "broke", "broken"},
	{"bring", "brought"},
	{"build", "built"},
	{"buy", "bought"},
	{"catch", "caught"},
	{"choose", "chose", "chosen"},
	{"come", "came"},
	{"deal", "dealt"},
	{"draw", "drew", "drawn"},
	{"drive", "drove", "driven"},
	{"eat", "ate", "eaten"},
	{"fall", "fell", "fallen"},
	{"find", "found"},
	{"fly", "flew", "flown"},
	{"forget", "forgot", "forgotten"},
	{"freeze", "froze", "frozen"},
	{"get", "got", "gotten"},
	{"give", "gave", "given"},
	{"go", "went", "gone"},
	{"grow", "grew", "grown"},
	{"hang", "hung"},
	{"hear", "heard"},
	{"hide", "hid", "hidden"},
	{"hold", "held"},
	{"keep", "kept"},
	{"know", "knew", "known"},
	{"lend", "lent"},
	{"lose", "lost"},
	{"make", "made"},
	{"mean", "meant"},
	{"meet", "met"},
	{"pay", "paid"},
	{"ride", "rode", "ridden"},
	{"ring", "rang", "rung"},
	{"run", "ran"},
	{"say", "said"},
	{"seek", "sought"},
	{"sell", "sold"},
	{"send", "sent"},
	{"shake", "shook", "shaken"},
	{"shoot", "shot"},
	{"show", "shown"},
	{"shrink", "shrank", "shrunk"},
	{"sing", "sang", "sung"},
	{"sink", "sank", "sunk"},
	{"sit", "sat"},
	{"sleep", "slept"},
	{"speak", "spoke", "spoken"},
	{"spend", "spent"},
	{"stand", "stood"},
	{"steal", "stole", "stolen"},
	{"stick", "stuck"},
	{"strike", "struck"},
	{"swim", "swam", "swum"},
	{"take", "took", "taken"},
	{"teach", "taught"},
	{"tear", "tore", "torn"},
	{"tell", "told"},
	{"think", "thought"},
	{"throw", "threw", "thrown"},
	{"understand", "understood"},
	{"wake", "woke", "woken"},
	{"wear", "wore", "worn"},
	{"win", "won"},
	{"write", "wrote", "written"},
	// plurals the stemmer leaves alone
	{"child", "children"},
	{"foot", "feet"},
	{"man", "men"},
	{"woman", "women"},
	{"mouse", "mice"},
	{"person", "people"},
	{"tooth", "teeth"},
	{"matrix", "matrices"},
	{"criterion", "criteria"},
	{"datum", "data"},
	{"medium", "media"},
	{"knife", "knives"},
	{"half", "halves"},
	{"shelf", "shelves"},
	{"wife", "wives"},
	{"loaf", "loaves"},
}

// relatedTerm is a term a query term widens to: at full weight when it is
// another form of the same word, at Params.Related when a related word.
type relatedTerm struct {
	term string
	same bool // an irregular form of the same word
}

// related maps a term (as Terms gives it) to its related terms.
var related = buildRelated()

func buildRelated() map[string][]relatedTerm {
	m := map[string][]relatedTerm{}
	add := func(group []string, same bool) {
		var ts []string
		for _, w := range group {
			// A stop word ("was", "did") has no term: queries never hold
			// it, so it widens to nothing and nothing widens to it.
			if t := Terms(w); len(t) == 1 {
				ts = append(ts, t[0])
			}
		}
		for _, a := range ts {
			for _, b := range ts {
				if a == b || hasRelated(m[a], b) {
					continue
				}
				m[a] = append(m[a], relatedTerm{term: b, same: same})
			}
		}
	}
	for _, g := range irregularForms {
		add(g, true)
	}
	for _, g := range relatedGroups {
		add(g, false)
	}
	return m
}

func hasRelated(rs []relatedTerm, term string) bool {
	for _, r := range rs {
		if r.term == term {
			return true
		}
	}
	return false
}
