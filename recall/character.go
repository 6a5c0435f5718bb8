package recall

import (
	"sort"
	"strings"
	"sync"
	"time"

	"koe"
	"koe/textindex"
)

// sessionGap splits a history into sessions: messages further apart than
// this start a new one. A session is what a memory is dated by and what
// scores a message by its surroundings.
const sessionGap = 4 * time.Hour

// entry is one indexed message, by its DocID in the keyword index.
type entry struct {
	history string // interned per character
	seq     uint64
	turn    int
	human   bool
	name    string
	nameKey string // name lowercased, matched against a query's words
	time    time.Time
	text    string
	meta    map[string]string
	tokens  int // the message's line in a block
	// saysWhen: the message dates something ("last week", "in May";
	// temporal.go).
	saysWhen bool
	session  int // index in character.sessions
	pos      int // position in its session
	dead     bool
	vector   []float32
}

type session struct {
	history      string
	start        time.Time
	headerTokens int
	docs         []textindex.DocID // in order
}

// summaryDoc is one summary of the agent's, pointing at the turns it covers.
type summaryDoc struct {
	history string
	turns   []int
	dead    bool
}

// character is one conf's index. Its lock guards everything in it; the
// keyword indexes lock themselves too, which costs nothing uncontended.
type character struct {
	count       func(string) int
	introTokens int

	mu        sync.RWMutex
	words     *textindex.Index
	entries   []entry // by DocID
	sessions  []session
	byHistory map[string][]textindex.DocID // in seq order
	bySeq     map[key]textindex.DocID
	deleted   map[string]bool // histories deleted: nothing of them comes back
	// forgotten memories stay out even when an indexer that saved one
	// just before Forget adds it after.
	forgotten map[key]bool
	names     map[string]bool // lowercased speaker names
	live      int
	missing   int // live entries without a vector

	sums      *textindex.Index
	sumDocs   []summaryDoc
	sumByHist map[string][]textindex.DocID
	sumKeys   map[string]string // history -> what its indexed summaries were
}

type key struct {
	history string
	seq     uint64
}

func newCharacter(count func(string) int) *character {
	if count == nil {
		// Tests without a tokenizer: about four characters a token.
		count = func(s string) int { return (len(s) + 3) / 4 }
	}
	return &character{
		count:       count,
		introTokens: count(blockIntro + "\n"),
		words:       textindex.New(textindex.Params{}),
		byHistory:   map[string][]textindex.DocID{},
		bySeq:       map[key]textindex.DocID{},
		deleted:     map[string]bool{},
		forgotten:   map[key]bool{},
		names:       map[string]bool{},
		sums:        textindex.New(textindex.Params{}),
		sumByHist:   map[string][]textindex.DocID{},
		sumKeys:     map[string]string{},
	}
}

// parseTime reads a record timestamp (local time, see koe.TimestampLayout).
func parseTime(ts string) time.Time {
	t, err := time.ParseInLocation(koe.TimestampLayout, ts, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// lineOf is how a message reads in a block.
func lineOf(name, text string) string {
	return name + ": " + text + "\n"
}

// speaker names a message's author when its record named none.
func speaker(e koe.RecallEntry) string {
	if e.Name != "" {
		return e.Name
	}
	if e.Role == koe.RoleHuman {
		return "User"
	}
	return "Assistant"
}

// add indexes entries, each history's in seq order after what it holds,
// and reports how many it added (not those it holds already, nor those
// forgotten or of a deleted history).
func (c *character) add(entries []koe.RecallEntry) int {
	type prepared struct {
		e      koe.RecallEntry
		terms  []string
		tokens int
		header int // the dated header's tokens, should it open a session
		when   bool
	}
	// The text work happens before the lock: readers keep recalling.
	prep := make([]prepared, 0, len(entries))
	for _, e := range entries {
		name := speaker(e)
		e.Name = name
		prep = append(prep, prepared{e: e, terms: textindex.Terms(e.Text),
			tokens: c.count(lineOf(name, oneLine(e.Text))), header: c.count(header(parseTime(e.Timestamp))),
			when: saysWhen(textindex.Words(e.Text))})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	added := 0
	for _, p := range prep {
		e := p.e
		k := key{e.HistoryUID, e.Seq}
		if c.deleted[e.HistoryUID] || c.forgotten[k] {
			continue
		}
		if _, dup := c.bySeq[k]; dup {
			continue
		}
		h := c.intern(e.HistoryUID)
		t := parseTime(e.Timestamp)
		id := c.words.Add(p.terms)
		for int(id) >= len(c.entries) {
			c.entries = append(c.entries, entry{dead: true})
		}
		sess := c.sessionFor(h, t, p.header)
		c.entries[id] = entry{
			history: h, seq: e.Seq, turn: e.Turn, human: e.Role == koe.RoleHuman,
			name: e.Name, nameKey: strings.ToLower(e.Name), time: t, text: e.Text, meta: e.Meta, tokens: p.tokens,
			session: sess, pos: len(c.sessions[sess].docs), vector: e.Vector, saysWhen: p.when,
		}
		c.sessions[sess].docs = append(c.sessions[sess].docs, id)
		c.byHistory[h] = append(c.byHistory[h], id)
		c.bySeq[k] = id
		c.names[strings.ToLower(e.Name)] = true
		c.live++
		if e.Vector == nil {
			c.missing++
		}
		added++
	}
	return added
}

// intern returns the history uid shared by its entries.
func (c *character) intern(uid string) string {
	if ids := c.byHistory[uid]; len(ids) > 0 {
		return c.entries[ids[0]].history
	}
	return strings.Clone(uid)
}

// sessionFor returns the session a message at t of history h belongs to:
// the history's latest, unless t is more than sessionGap after its last
// message.
func (c *character) sessionFor(h string, t time.Time, headerTokens int) int {
	if ids := c.byHistory[h]; len(ids) > 0 {
		last := c.entries[ids[len(ids)-1]]
		if t.Sub(last.time) <= sessionGap {
			return last.session
		}
	}
	c.sessions = append(c.sessions, session{history: h, start: t, headerTokens: headerTokens})
	return len(c.sessions) - 1
}

// remove drops one entry, for good, and reports whether the index held
// it.
func (c *character) remove(uid string, seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgotten[key{uid, seq}] = true
	id, ok := c.bySeq[key{uid, seq}]
	if ok {
		c.killLocked(id)
	}
	return ok
}

// lastSeq is the sequence number of the last entry of a history the
// index took (0: none): the store holds no other entry of it before, but
// for those forgotten.
func (c *character) lastSeq(uid string) uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ids := c.byHistory[uid]
	if len(ids) == 0 {
		return 0
	}
	return c.entries[ids[len(ids)-1]].seq
}

// historyUIDs lists the histories the index holds entries or summaries
// of.
func (c *character) historyUIDs() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	seen := make(map[string]bool, len(c.byHistory))
	out := make([]string, 0, len(c.byHistory))
	for uid := range c.byHistory {
		seen[uid] = true
		out = append(out, uid)
	}
	for uid := range c.sumByHist {
		if !seen[uid] {
			out = append(out, uid)
		}
	}
	return out
}

func (c *character) killLocked(id textindex.DocID) {
	e := &c.entries[id]
	if e.dead {
		return
	}
	e.dead = true
	c.words.Remove(id)
	delete(c.bySeq, key{e.history, e.seq})
	c.live--
	if e.vector == nil {
		c.missing--
	}
	e.vector, e.text, e.meta = nil, "", nil
}

// dropHistory forgets a deleted history, now and for good.
func (c *character) dropHistory(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleted[uid] = true
	for _, id := range c.byHistory[uid] {
		c.killLocked(id)
	}
	delete(c.byHistory, uid)
	for _, id := range c.sumByHist[uid] {
		c.sums.Remove(id)
		c.sumDocs[id].dead = true
	}
	delete(c.sumByHist, uid)
	delete(c.sumKeys, uid)
}

// setSummaries indexes a history's summaries, replacing what was indexed
// of them if they changed, and reports whether they did.
func (c *character) setSummaries(uid string, sums []koe.SummaryRecord) bool {
	var sig strings.Builder
	for _, s := range sums {
		sig.WriteString(s.Summary)
		sig.WriteByte(0)
	}
	terms := make([][]string, len(sums))
	for i, s := range sums {
		terms[i] = textindex.Terms(s.Summary)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted[uid] || c.sumKeys[uid] == sig.String() {
		return false
	}
	for _, id := range c.sumByHist[uid] {
		c.sums.Remove(id)
		c.sumDocs[id].dead = true
	}
	h := c.intern(uid)
	var ids []textindex.DocID
	for i, s := range sums {
		id := c.sums.Add(terms[i])
		for int(id) >= len(c.sumDocs) {
			c.sumDocs = append(c.sumDocs, summaryDoc{dead: true})
		}
		c.sumDocs[id] = summaryDoc{history: h, turns: append([]int(nil), s.Turns...)}
		ids = append(ids, id)
	}
	c.sumByHist[uid] = ids
	c.sumKeys[uid] = sig.String()
	return true
}

// turnDocs returns the live entries of a history's turns, in order.
func (c *character) turnDocsLocked(h string, turns []int) []textindex.DocID {
	ids := c.byHistory[h]
	var out []textindex.DocID
	for _, t := range turns {
		i := sort.Search(len(ids), func(i int) bool { return c.entries[ids[i]].turn >= t })
		for ; i < len(ids) && c.entries[ids[i]].turn == t; i++ {
			if !c.entries[ids[i]].dead {
				out = append(out, ids[i])
			}
		}
	}
	return out
}

// withoutVectors returns up to n live entries lacking a vector.
func (c *character) withoutVectors(n int) []koe.RecallEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.missing == 0 {
		return nil
	}
	var out []koe.RecallEntry
	for _, e := range c.entries {
		if len(out) == n {
			break
		}
		if !e.dead && e.vector == nil {
			out = append(out, koe.RecallEntry{HistoryUID: e.history, Seq: e.seq, Text: e.text})
		}
	}
	return out
}

// setVectors gives entries their vectors.
func (c *character) setVectors(entries []koe.RecallEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		id, ok := c.bySeq[key{e.HistoryUID, e.Seq}]
		if !ok || e.Vector == nil || c.entries[id].vector != nil {
			continue
		}
		c.entries[id].vector = e.Vector
		c.missing--
	}
}

// size is the number of live entries.
func (c *character) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.live
}
