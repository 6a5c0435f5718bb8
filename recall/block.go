package recall

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Query asks what a character remembers that bears on a message.
type Query struct {
	ConfUID string
	// HistoryUID is the conversation asking ("" for none); Exclude lists
	// its turns the context holds word for word, which the block does not
	// repeat. Its other turns (those only summarised) may be recalled.
	HistoryUID string
	Exclude    []int
	// Text is the user's message.
	Text string
	// Budget is the most tokens the block may take.
	Budget int
	// Ranking, if set, replaces DefaultRanking (the evaluation tries
	// others).
	Ranking *Ranking
}

// Memory is one recalled message.
type Memory struct {
	HistoryUID string            `json:"history_uid"`
	Seq        uint64            `json:"seq"`
	Turn       int               `json:"turn"`
	Role       string            `json:"role"`
	Name       string            `json:"name"`
	Time       time.Time         `json:"time"`
	Text       string            `json:"text"`
	Meta       map[string]string `json:"metadata,omitempty"`
	// Rank is the memory's place in the ranking (1: best).
	Rank int `json:"rank"`
}

// Block is what a turn gets: the memories, chronological, and their text
// as the model reads it.
type Block struct {
	Text     string
	Tokens   int
	Memories []Memory
	// Indexed is how many messages the character's index holds; Vectors
	// says whether the vector ranking took part.
	Indexed int
	Vectors bool
}

// blockIntro opens a block. It tells the model where these lines come
// from, so that it neither repeats them as news nor takes them for what
// the user just said.
const blockIntro = "Memories from earlier conversations (you remember these; they were not said just now):"

// Recall builds the memories block for a turn. An empty Block means
// nothing relevant was found (or the budget cannot hold a single line).
func (s *Service) Recall(ctx context.Context, q Query) (Block, error) {
	c, err := s.character(ctx, q.ConfUID)
	if err != nil {
		return Block{}, err
	}
	if strings.TrimSpace(q.Text) == "" || q.Budget <= 0 {
		return Block{Indexed: c.size()}, nil
	}
	qvec := s.embedQuery(ctx, c, q.Text)
	rk := DefaultRanking
	if q.Ranking != nil {
		rk = *q.Ranking
	}
	excluded := make(map[int]bool, len(q.Exclude))
	for _, t := range q.Exclude {
		excluded[t] = true
	}
	exclude := func(e *entry) bool { return e.history == q.HistoryUID && excluded[e.turn] }

	c.mu.RLock()
	// A line costs at least a few tokens, so the budget bounds how many
	// candidates can matter.
	order := c.rankLocked(q.Text, rk, exclude, qvec, q.Budget, q.Budget/4+16)
	picked, tokens := c.pickLocked(order, q.Budget)
	b := Block{Indexed: c.live, Vectors: qvec != nil}
	b.Memories = c.memoriesLocked(picked)
	c.mu.RUnlock()

	b.Text = format(b.Memories)
	b.Tokens = tokens
	if len(b.Memories) == 0 {
		b.Text = ""
	}
	return b, nil
}

// picked is a ranked message chosen for the block.
type picked struct {
	ranked
	rank int
}

// pickLocked takes messages in rank order while they fit the budget,
// counting a dated header for each session a message opens, and returns
// them with the block's size. The size is the sum of its lines' counts,
// made when they were indexed: counting the block whole would cost a
// millisecond per thousand tokens in every turn, and joined lines count
// the same or a token less.
func (c *character) pickLocked(order []ranked, budget int) ([]picked, int) {
	used := c.introTokens
	headers := map[int]bool{}
	var out []picked
	for i, r := range order {
		e := &c.entries[r.id]
		cost := e.tokens
		if !headers[e.session] {
			cost += c.sessions[e.session].headerTokens
		}
		if used+cost > budget {
			continue
		}
		used += cost
		headers[e.session] = true
		out = append(out, picked{ranked: r, rank: i + 1})
	}
	if len(out) == 0 {
		return nil, 0
	}
	return out, used
}

// memoriesLocked copies the picked messages out, in chronological order.
func (c *character) memoriesLocked(ps []picked) []Memory {
	sort.Slice(ps, func(i, j int) bool {
		a, b := &c.entries[ps[i].id], &c.entries[ps[j].id]
		sa, sb := c.sessions[a.session].start, c.sessions[b.session].start
		if !sa.Equal(sb) {
			return sa.Before(sb)
		}
		if a.session != b.session {
			return a.session < b.session
		}
		return a.pos < b.pos
	})
	out := make([]Memory, len(ps))
	for i, p := range ps {
		e := &c.entries[p.id]
		role := "ai"
		if e.human {
			role = "human"
		}
		out[i] = Memory{
			HistoryUID: e.history, Seq: e.seq, Turn: e.turn, Role: role, Name: e.name,
			Time: c.sessions[e.session].start, Text: e.text, Meta: e.meta, Rank: p.rank,
		}
	}
	return out
}

// format writes memories (chronological, each carrying its session's
// start as Time) as the block: a dated header per session, then
// "Name: text" lines.
//
// It writes straight into one buffer sized up front: built from the
// strings header, lineOf and oneLine return, a block cost every turn a
// dozen kilobytes of garbage.
func format(ms []Memory) string {
	size := len(blockIntro) + 1
	for _, m := range ms {
		size += len(headerLayout) + 8 + len(m.Name) + len(": ") + len(m.Text) + 1
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(blockIntro)
	b.WriteByte('\n')
	var last time.Time
	var lastHistory string
	var stamp [64]byte
	for i, m := range ms {
		if i == 0 || !m.Time.Equal(last) || m.HistoryUID != lastHistory {
			writeHeader(&b, m.Time, stamp[:0])
			last, lastHistory = m.Time, m.HistoryUID
		}
		// lineOf(m.Name, oneLine(m.Text))
		b.WriteString(m.Name)
		b.WriteString(": ")
		first := true
		for w := range strings.FieldsSeq(m.Text) {
			if !first {
				b.WriteByte(' ')
			}
			b.WriteString(w)
			first = false
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

const headerLayout = "Mon 2 January 2006"

// header dates a session.
func header(t time.Time) string {
	if t.IsZero() {
		return "[undated]\n"
	}
	return fmt.Sprintf("[%s]\n", t.Format(headerLayout))
}

// writeHeader writes header(t) to b, formatting into buf.
func writeHeader(b *strings.Builder, t time.Time, buf []byte) {
	if t.IsZero() {
		b.WriteString("[undated]\n")
		return
	}
	b.WriteByte('[')
	b.Write(t.AppendFormat(buf, headerLayout))
	b.WriteString("]\n")
}

// oneLine keeps a message on its line: a line break inside it would read
// as another speaker's line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
