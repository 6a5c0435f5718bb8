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
// Irregular forms and spellings are the other part: the stemmer makes
// "writes" and "writing" one term but leaves "wrote" and "written" apart
// from "write", "took" from "take", and "tyre" from "tire". They are
// widened at full weight, being the same word.
//
// The table is short and general: each group is words an English manual
// and its readers use for one thing (about 140 groups; a word in several
// groups gets the related terms of all of them). It was first drawn from
// the misses on the SQLite manual's questions (knowledge/testdata/manual)
// and then widened to everyday technical English; docs/memory.md has what
// it changes on that set and on a second one. Entries are plain words,
// analysed like any text when the package loads. Conversation recall does
// not use it: on LoCoMo it changed nothing but a few multi-hop questions,
// for the worse.

// relatedGroups are synonyms and near-synonyms of technical English: the
// everyday word a reader asks with beside the word a manual, a reference
// or a specification writes. Words with a common second sense that would
// pull in unrelated passages are left out.
var relatedGroups = [][]string{
	// quantities and measures
	{"size", "byte", "large", "big", "length", "magnitude", "dimension"},
	{"limit", "maximum", "max", "most", "exceed", "cap", "ceiling", "upper"},
	{"minimum", "min", "least", "floor", "lower"},
	{"number", "integer", "count", "amount", "quantity", "total"},
	{"fast", "quick", "quickly", "speed", "rapid", "soon"},
	{"slow", "slowly", "latency", "sluggish"},
	{"heavy", "weight", "weigh", "mass", "load"},
	{"long", "duration", "lasting", "period"},
	{"far", "distance", "range"},
	{"hot", "heat", "warm", "temperature", "overheat"},
	{"cold", "freeze", "freezing", "frost", "winter", "temperature"},
	{"often", "frequency", "frequently", "interval", "regularly"},
	{"price", "cost", "fee", "charge", "free"},
	{"percent", "percentage", "share", "proportion"},
	{"enough", "sufficient", "adequate"},
	{"approximately", "roughly", "estimate", "around"},
	{"power", "strength", "strong", "powerful", "watt"},
	{"energy", "capacity", "charge"},
	{"pressure", "inflate", "bar", "psi"},
	{"tight", "tighten", "torque", "snug"},
	{"loose", "loosen", "slack"},
	// storage and data
	{"disk", "disc", "storage", "drive", "persistent"},
	{"store", "save", "keep", "persist", "retain", "record"},
	{"file", "filesystem", "document"},
	{"memory", "ram", "cache"},
	{"copy", "duplicate", "backup", "replica", "clone"},
	{"log", "journal", "history"},
	{"table", "list", "chart"},
	{"column", "field", "attribute"},
	{"row", "record", "entry"},
	{"name", "label", "title", "identifier"},
	// actions on things
	{"delete", "remove", "erase", "drop", "discard", "purge", "clear"},
	{"create", "make", "build", "generate"},
	{"add", "insert", "append", "include", "attach", "fit", "install", "mount"},
	{"change", "modify", "alter", "edit", "update", "adjust", "replace", "swap"},
	{"upgrade", "update", "firmware", "software", "version"},
	{"start", "begin", "launch", "initiate", "boot"},
	{"enable", "activate", "switch", "turn", "power"},
	{"disable", "deactivate", "suppress", "cut"},
	{"stop", "end", "terminate", "quit", "exit", "leave", "halt", "finish", "cease"},
	{"pause", "wait", "hold", "suspend"},
	{"postpone", "defer", "delay", "later"},
	{"fix", "repair", "recover", "restore", "salvage", "rescue", "mend", "service"},
	{"merge", "combine", "join", "patch", "union"},
	{"find", "search", "locate", "lookup", "look"},
	{"print", "output", "display", "show", "screen", "indicate"},
	{"pass", "give", "specify", "supply", "provide", "deliver"},
	{"check", "verify", "enforce", "validate", "constraint", "inspect", "inspection", "test"},
	{"allow", "permit", "permission", "legal", "law"},
	{"forbid", "prohibit", "prevent", "block", "refuse", "reject", "deny"},
	{"need", "require", "necessary", "mandatory", "requirement"},
	{"follow", "implement", "conform", "comply", "compliance"},
	{"connect", "plug", "attach", "link", "pair"},
	{"disconnect", "unplug", "detach", "unlink"},
	{"send", "transmit", "ship", "post", "mail"},
	{"receive", "get", "obtain", "fetch", "download"},
	{"use", "usage", "utilize", "operate", "run"},
	{"help", "assist", "assistance", "support", "aid"},
	{"try", "attempt", "retry"},
	{"buy", "purchase", "order"},
	{"move", "transport", "carry", "transfer", "haul"},
	{"pull", "tow", "drag"},
	{"push", "press", "shove"},
	{"clean", "wash", "rinse", "wipe"},
	{"oil", "lubricate", "lube", "grease"},
	{"charge", "recharge", "refill", "top"},
	{"protect", "guard", "shield", "cover"},
	{"open", "unlock", "unlocked"},
	{"close", "shut", "lock", "locked"},
	{"hide", "conceal", "mask"},
	{"increase", "raise", "grow", "boost", "extend"},
	{"decrease", "reduce", "lower", "shrink", "shorten", "drop"},
	{"measure", "gauge", "meter", "reading"},
	{"wear", "worn", "tear", "erode"},
	{"lost", "missing", "misplaced"},
	// states and qualities
	{"damage", "damaged", "corrupt", "broken", "faulty", "harm", "crack", "bent"},
	{"error", "fault", "failure", "fail", "problem", "wrong", "trouble", "malfunction"},
	{"safe", "safety", "secure", "danger", "dangerous", "hazard", "risk"},
	{"wet", "water", "rain", "moisture", "damp", "waterproof"},
	{"dry", "dried"},
	{"dirty", "dirt", "mud", "dust", "grime"},
	{"noise", "noisy", "sound", "squeal", "rattle", "click", "hum"},
	{"weak", "weaker", "faint", "feeble", "soft"},
	{"new", "fresh", "replacement"},
	{"old", "aged", "age", "ageing", "aging", "worn"},
	{"empty", "flat", "drained", "depleted"},
	{"full", "complete", "completely"},
	{"default", "initial", "initially", "unchanged", "factory"},
	{"difference", "differ", "separate", "distinguish", "versus"},
	{"same", "identical", "equal", "equivalent"},
	{"possible", "possibly", "able"},
	{"automatic", "automatically", "auto"},
	{"manual", "manually", "hand"},
	{"correct", "right", "proper", "properly"},
	{"sort", "order", "arrange", "sequence"},
	// time
	{"clock", "time", "hour"},
	{"calendar", "date", "day"},
	{"year", "annual", "annually", "yearly"},
	{"month", "monthly"},
	{"week", "weekly"},
	{"daily", "everyday"},
	{"night", "dark", "dusk", "evening"},
	{"first", "initial", "begin"},
	{"last", "final", "end"},
	{"before", "prior", "advance"},
	// people and places
	{"user", "rider", "driver", "operator", "owner", "customer"},
	{"child", "kid", "baby", "infant", "young"},
	{"adult", "grown"},
	{"shop", "dealer", "store", "retailer", "seller"},
	{"company", "manufacturer", "maker", "vendor"},
	{"home", "house", "indoors", "inside"},
	{"outside", "outdoors", "outdoor"},
	// things
	{"machine", "computer", "host", "server", "network", "remote", "device"},
	{"nfs", "network", "filesystem"},
	{"phone", "mobile", "smartphone", "cellphone"},
	{"app", "application", "program"},
	{"screen", "display", "monitor"},
	{"lamp", "light", "headlight", "bulb"},
	{"button", "key", "switch"},
	{"battery", "cell", "accumulator"},
	{"charger", "adapter", "adaptor", "supply"},
	{"cable", "wire", "cord", "lead"},
	{"socket", "outlet", "port", "plug"},
	{"motor", "engine"},
	{"plane", "aircraft", "airplane", "aeroplane", "flight", "fly", "airline"},
	{"car", "vehicle", "automobile"},
	{"bike", "bicycle", "cycle", "ebike"},
	{"tool", "spanner", "wrench", "screwdriver"},
	{"screw", "bolt", "nut"},
	{"wheel", "tyre", "rim"},
	{"guide", "manual", "documentation", "section", "chapter", "instruction"},
	{"standard", "specification", "rfc", "norm"},
	{"reference", "foreign", "parent", "child"},
	{"version", "revision", "release"},
	{"password", "passphrase", "credential"},
	{"warranty", "guarantee", "guaranteed", "claim"},
	{"law", "legal", "regulation", "rule", "offence", "illegal"},
}

// spellings are British and American spellings of one word that the
// stemmer does not bring together.
var spellings = [][]string{
	{"colour", "color"}, {"favour", "favor"}, {"behaviour", "behavior"},
	{"neighbour", "neighbor"}, {"labour", "labor"}, {"flavour", "flavor"},
	{"honour", "honor"}, {"vapour", "vapor"}, {"odour", "odor"},
	{"centre", "center"}, {"metre", "meter"}, {"litre", "liter"},
	{"fibre", "fiber"}, {"theatre", "theater"}, {"calibre", "caliber"},
	{"tyre", "tire"}, {"grey", "gray"}, {"licence", "license"},
	{"defence", "defense"}, {"offence", "offense"}, {"aluminium", "aluminum"},
	{"catalogue", "catalog"}, {"dialogue", "dialog"}, {"analogue", "analog"},
	{"programme", "program"}, {"analyse", "analyze"}, {"paralyse", "paralyze"},
	{"organise", "organize"}, {"recognise", "recognize"}, {"customise", "customize"},
	{"initialise", "initialize"}, {"optimise", "optimize"}, {"synchronise", "synchronize"},
	{"authorise", "authorize"}, {"minimise", "minimize"}, {"maximise", "maximize"},
	{"normalise", "normalize"}, {"serialise", "serialize"}, {"prioritise", "prioritize"},
	{"finalise", "finalize"}, {"standardise", "standardize"}, {"summarise", "summarize"},
	{"realise", "realize"}, {"utilise", "utilize"}, {"visualise", "visualize"},
	{"categorise", "categorize"}, {"memorise", "memorize"}, {"apologise", "apologize"},
	{"mould", "mold"}, {"plough", "plow"}, {"draught", "draft"},
	{"manoeuvre", "maneuver"}, {"artefact", "artifact"}, {"sceptical", "skeptical"},
	{"kerb", "curb"}, {"jewellery", "jewelry"}, {"gauge", "gage"},
	{"fulfil", "fulfill"}, {"enrol", "enroll"}, {"cheque", "check"},
	{"pyjamas", "pajamas"}, {"aeroplane", "airplane"}, {"disc", "disk"},
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
	for _, g := range spellings {
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

// Related is the terms the table relates to term (as Terms gives it): the
// terms a query holding term is widened with when Params.Related is set.
// A caller that judges a passage by the query's words (does it speak to
// the question at all?) counts these as the word, so that its judgement
// agrees with the ranking.
func Related(term string) []string {
	rs := related[term]
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.term
	}
	return out
}
