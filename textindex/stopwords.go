package textindex

// stopWords are English function words: frequent enough in conversation to
// match almost every turn, too empty to tell turns apart. Entries are in the
// form the tokenizer produces, so contractions appear without their
// apostrophe ("don't" -> "dont"); "it's", "he's", "that's" lose their "'s"
// like possessives do and land on "it", "he", "that".
//
// Words that are usually function words but also a name, a month or a
// country ("will", "may", "might", "us") are left in: BM25's IDF already
// weighs a frequent word down, while dropping "Will" or "May" loses it.
var stopWords = setOf(
	// articles, conjunctions, particles
	"a", "an", "the", "and", "or", "but", "nor", "so", "if", "then", "than",
	"as", "because", "while", "though", "although", "whether", "either",
	"neither", "also", "just", "too", "very", "quite", "rather",
	// prepositions
	"of", "at", "by", "for", "with", "about", "against", "between", "into",
	"through", "during", "before", "after", "above", "below", "to", "from",
	"up", "down", "in", "out", "on", "off", "over", "under", "again",
	"further", "once", "upon", "onto", "within", "without", "toward",
	"towards", "via", "per",
	// pronouns and determiners
	"i", "me", "my", "myself", "mine", "we", "our", "ours", "ourselves",
	"you", "your", "yours", "yourself", "yourselves", "he", "him", "his",
	"himself", "she", "her", "hers", "herself", "it", "its", "itself",
	"they", "them", "their", "theirs", "themselves", "this", "that",
	"these", "those", "what", "which", "who", "whom", "whose", "whoever",
	"whatever", "each", "every", "any", "some", "such", "both", "all",
	"few", "more", "most", "other", "another", "same", "own", "no", "not",
	"only",
	// forms of be, have, do and the common modals
	"am", "is", "are", "was", "were", "be", "been", "being", "have", "has",
	"had", "having", "do", "does", "did", "doing", "would", "should",
	"could", "shall", "must", "can",
	// question words and adverbs of place and time
	"here", "there", "when", "where", "why", "how", "now",
	// contractions, apostrophe removed
	"dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "havent",
	"hasnt", "hadnt", "cant", "couldnt", "wont", "wouldnt", "shouldnt",
	"mustnt", "im", "ive", "youre", "youve", "youll", "youd", "theyre",
	"theyve", "theyll", "theyd", "weve", "hed", "shed", "itll",
	// conversational fillers
	"oh", "um", "uh", "hmm", "yeah", "ok", "okay",
)

func setOf(words ...string) map[string]struct{} {
	m := make(map[string]struct{}, len(words))
	for _, w := range words {
		m[w] = struct{}{}
	}
	return m
}
