package knowledge

import (
	"context"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Split cuts a document's text into pieces of at most size tokens, as
// count counts them (the caller passes the model's tokenizer).
//
// Pieces end on paragraph boundaries; a "#" heading (Markdown, HTML)
// starts a new piece once the current one holds a quarter of size, so
// that sections stay whole and each piece's Heading is the section it
// belongs to. A paragraph longer than size is cut at sentences, then
// lines, then words, and a word longer than size (a hash, a data blob)
// between characters. A piece that continues the text of the one before
// it (not one that starts at a heading) repeats up to overlap tokens of
// that piece's end: whole sentences or lines where they fit, else words.
//
// Each piece is a stretch of t.Body with its outer white space trimmed, so
// every word of Body is in some piece. size is at least 1; overlap is
// held to at most half of size, so that every piece brings new text.
func Split(t Text, count func(string) int, size, overlap int) []Piece {
	pieces, _ := split(context.Background(), t, count, size, overlap)
	return pieces
}

// split is Split until ctx ends, checked between blocks and between the
// parts of a long one.
func split(ctx context.Context, t Text, count func(string) int, size, overlap int) ([]Piece, error) {
	size = max(size, 1)
	s := &splitter{
		ctx:      ctx,
		body:     t.Body,
		count:    count,
		size:     size,
		overlap:  min(max(overlap, 0), size/2),
		lines:    t.Format == "code" || t.Format == "json",
		headings: t.Format == "markdown" || t.Format == "html",
	}
	for _, b := range s.blocks() {
		if s.err == nil {
			s.err = ctx.Err()
		}
		if s.err != nil {
			return nil, s.err
		}
		s.place(b)
	}
	if s.err != nil {
		return nil, s.err
	}
	s.flush(false, true)
	for i := range s.out {
		s.out[i].Page = t.PageAt(s.starts[i])
	}
	return s.out, nil
}

// span is a stretch of the body, [start, end), with its tokens counted
// on its own.
type span struct {
	start, end int
	tokens     int
	heading    bool
	overlap    bool // repeated from the previous piece
}

type splitter struct {
	ctx      context.Context
	err      error // ctx's, once it ended
	body     string
	count    func(string) int
	size     int
	overlap  int
	lines    bool // code and JSON: cut at lines, never at "sentences"
	headings bool // "#" lines are headings

	cur       []span // the piece being filled
	curTokens int    // an estimate: its spans' tokens and what lies between
	heading   string // the heading in force where cur starts
	last      string // the heading in force after cur's last span

	out    []Piece
	starts []int
}

// blocks are the body's paragraphs (runs of lines between blank lines)
// and its heading lines, in order; code fences in Markdown hold no
// headings.
func (s *splitter) blocks() []span {
	var blocks []span
	start := -1 // the open paragraph's start
	fenced := false
	closeAt := func(end int) {
		if start >= 0 {
			blocks = append(blocks, s.trimmed(start, end, false))
			start = -1
		}
	}
	off := 0
	for line := range strings.Lines(s.body) {
		lineStart := off
		off += len(line)
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			closeAt(lineStart)
		case s.headings && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fenced = !fenced
			if start < 0 {
				start = lineStart
			}
		case s.headings && !fenced && headingLevel(line) > 0:
			closeAt(lineStart)
			blocks = append(blocks, s.trimmed(lineStart, off, true))
		default:
			if start < 0 {
				start = lineStart
			}
		}
	}
	closeAt(len(s.body))
	return blocks
}

// trimmed is [start, end) without its outer white space.
func (s *splitter) trimmed(start, end int, heading bool) span {
	text := s.body[start:end]
	lead := len(text) - len(strings.TrimLeftFunc(text, unicode.IsSpace))
	return span{start: start + lead, end: start + len(strings.TrimRightFunc(text, unicode.IsSpace)), heading: heading}
}

// headingLevel is 1–6 for a "#" heading line, else 0.
func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n >= len(line) || (line[n] != ' ' && line[n] != '\t') || strings.TrimSpace(line[n:]) == "" {
		return 0
	}
	return n
}

// headingText is a heading line without its marks.
func headingText(line string) string {
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(strings.TrimLeft(line, "#")), "#"))
}

func (s *splitter) text(sp span) string { return s.body[sp.start:sp.end] }

// maxTokenBytes is more bytes than any token of the tokenizers koe uses
// holds: a span longer than size times it is over size tokens without
// counting it, which for one long word costs seconds per megabyte.
const maxTokenBytes = 128

// countSpan is sp's tokens, or size+1 for a span certainly over size.
func (s *splitter) countSpan(sp span) int {
	if sp.end-sp.start > s.size*maxTokenBytes {
		return s.size + 1
	}
	return s.count(s.text(sp))
}

// place puts one block in the current piece or the next ones.
func (s *splitter) place(b span) {
	b.tokens = s.countSpan(b)
	if b.heading && b.tokens <= s.size {
		if s.curTokens >= s.size/4 {
			s.flush(false, false)
		}
		s.add(b)
		return
	}
	b.heading = false // a "heading" longer than a piece is a paragraph
	if b.tokens <= s.size {
		s.placeSmall(b)
		return
	}
	for _, part := range s.parts(b, 0) {
		s.placeSmall(part)
	}
}

// placeSmall puts a span of at most size tokens in the current piece, or
// starts the next piece with it.
func (s *splitter) placeSmall(sp span) {
	if !s.fits(sp) {
		s.flush(true, false)
	}
	// The overlap gives way to new text; headings that cannot share a
	// piece with it make one of their own.
	for !s.fits(sp) && len(s.cur) > 0 && s.cur[0].overlap {
		s.cur = s.cur[1:]
		s.recount()
	}
	if !s.fits(sp) {
		s.flush(false, true)
	}
	s.add(sp)
}

// between is the estimated cost of the white space before sp in cur.
func (s *splitter) between(sp span) int {
	if len(s.cur) == 0 {
		return 0
	}
	return s.count(s.body[s.cur[len(s.cur)-1].end:sp.start])
}

func (s *splitter) fits(sp span) bool {
	return s.curTokens+s.between(sp)+sp.tokens <= s.size
}

func (s *splitter) add(sp span) {
	if len(s.cur) == 0 {
		s.heading = s.last
	}
	s.curTokens += s.between(sp) + sp.tokens
	s.cur = append(s.cur, sp)
	if sp.heading {
		s.last = headingText(s.text(sp))
		if len(s.cur) == 1 {
			s.heading = s.last
		}
	}
}

func (s *splitter) recount() {
	cur := s.cur
	s.cur, s.curTokens = nil, 0
	for _, sp := range cur {
		s.curTokens += s.between(sp) + sp.tokens
		s.cur = append(s.cur, sp)
	}
}

// flush ends the current piece. Headings at its end move to the next
// piece, which they head, unless this is the last; with overlap, the
// next piece starts with the end of this one.
func (s *splitter) flush(overlap, last bool) {
	var carried []span
	for !last && len(s.cur) > 0 && s.cur[len(s.cur)-1].heading {
		carried = append([]span{s.cur[len(s.cur)-1]}, carried...)
		s.cur = s.cur[:len(s.cur)-1]
	}
	if len(s.cur) == 0 {
		s.cur = carried
		s.recount()
		return
	}
	// The estimate may be a few tokens short of the real count: spans
	// move to the next piece until the piece fits.
	var spilled []span
	start, end := s.cur[0].start, s.cur[len(s.cur)-1].end
	tokens := s.count(s.body[start:end])
	for tokens > s.size && len(s.cur) > 1 {
		spilled = append([]span{s.cur[len(s.cur)-1]}, spilled...)
		s.cur = s.cur[:len(s.cur)-1]
		end = s.cur[len(s.cur)-1].end
		tokens = s.count(s.body[start:end])
	}
	// The piece is headed by the heading its text is under: the last of
	// the headings it starts with, else the one in force before it.
	heading := s.heading
	for _, sp := range s.cur {
		if !sp.heading {
			break
		}
		heading = headingText(s.text(sp))
	}
	s.out = append(s.out, Piece{Text: s.body[start:end], Heading: heading, Tokens: tokens})
	s.starts = append(s.starts, start)

	after := s.heading
	for _, sp := range s.cur {
		if sp.heading {
			after = headingText(s.text(sp))
		}
	}
	s.cur, s.curTokens = nil, 0
	s.last = after
	if len(carried) > 0 {
		for _, sp := range carried {
			s.add(sp)
		}
	} else if overlap && s.overlap > 0 {
		if tail, ok := s.tail(start, end); ok {
			tail.overlap = true
			s.add(tail)
		}
	}
	for _, sp := range spilled {
		s.placeSmall(sp)
	}
}

// tail is the end of [start, end) of at most overlap tokens: whole
// sentences (lines in code) where they fit, else words; never a heading.
func (s *splitter) tail(start, end int) (span, bool) {
	whole := span{start: start, end: end}
	for _, level := range []int{levelSentences, levelWords} {
		units := s.cut(whole, level)
		best := span{}
		for i := len(units) - 1; i >= 0 && !units[i].heading; i-- {
			t := s.count(s.body[units[i].start:end])
			if t > s.overlap {
				break
			}
			best = span{start: units[i].start, end: end, tokens: t}
		}
		if best.end > 0 {
			return best, true
		}
	}
	return span{}, false
}

// The levels a long paragraph is cut at, coarsest first.
const (
	levelSentences = iota
	levelLines
	levelWords
	levelRunes
)

// parts cuts a span of more than size tokens into spans of at most size
// tokens each, each at the coarsest level that gets it there.
func (s *splitter) parts(sp span, level int) []span {
	if s.err == nil {
		s.err = s.ctx.Err()
	}
	if s.err != nil {
		return nil
	}
	if level == levelRunes {
		return s.runeParts(sp)
	}
	units := s.cut(sp, level)
	if len(units) == 1 && units[0].start == sp.start && units[0].end == sp.end {
		return s.parts(sp, level+1) // nothing to cut at this level
	}
	var out []span
	for _, u := range units {
		u.tokens = s.countSpan(u)
		if u.tokens <= s.size {
			out = append(out, u)
			continue
		}
		out = append(out, s.parts(u, level+1)...)
	}
	return out
}

// cut splits sp at one level, keeping headings whole; white space between
// the parts is left out of them.
func (s *splitter) cut(sp span, level int) []span {
	text := s.text(sp)
	var out []span
	emit := func(from, to int) {
		if u := s.trimmed(sp.start+from, sp.start+to, false); u.end > u.start {
			u.heading = s.headings && headingLevel(s.body[u.start:u.end]) > 0 && !strings.Contains(s.body[u.start:u.end], "\n")
			out = append(out, u)
		}
	}
	if level == levelSentences && s.lines {
		level = levelLines
	}
	from := 0
	switch level {
	case levelSentences:
		for i, r := range text {
			size := utf8.RuneLen(r)
			next, _ := utf8.DecodeRuneInString(text[i+size:])
			switch {
			case r == '\n' && i+1 < len(text) && (headingLevel(text[i+1:]) > 0):
				emit(from, i)
				from = i + 1
			case strings.ContainsRune("。！？", r):
				emit(from, i+size)
				from = i + size
			case strings.ContainsRune(".!?", r) && (i+size == len(text) || unicode.IsSpace(next)):
				emit(from, i+size)
				from = i + size
			}
		}
	case levelLines:
		for i, r := range text {
			if r == '\n' {
				emit(from, i)
				from = i + 1
			}
		}
	case levelWords:
		for i, r := range text {
			if unicode.IsSpace(r) {
				emit(from, i)
				from = i + utf8.RuneLen(r)
			}
		}
	}
	emit(from, len(text))
	return out
}

// runeParts cuts a word longer than size between characters, each part
// the longest prefix of what is left that fits. The search for each
// starts at the length of the part before: the parts of one long word
// are of nearly one length, so that a part costs a few counts of about
// its own length.
func (s *splitter) runeParts(sp span) []span {
	var out []span
	guess := s.size
	for start := sp.start; start < sp.end; {
		if s.err = s.ctx.Err(); s.err != nil {
			return out
		}
		end, tokens := s.longestFit(start, sp.end, guess)
		out = append(out, span{start: start, end: end, tokens: tokens})
		guess = end - start
		start = end
	}
	return out
}

// longestFit is the end of the longest stretch of the body from start,
// up to limit, of at most size tokens, and its tokens; at least one
// character, even one that counts more.
func (s *splitter) longestFit(start, limit, guess int) (end, tokens int) {
	after := func(i int) int {
		_, n := utf8.DecodeRuneInString(s.body[i:])
		return i + n
	}
	fits := func(end int) (bool, int) {
		n := s.count(s.body[start:end])
		return n <= s.size, n
	}
	// fit is the longest end known to fit (start: none), over the
	// shortest known not to (limit+1: none).
	fit, fitTokens, over := start, 0, limit+1
	probe := max(runeBoundary(s.body, min(start+guess, limit)), after(start))
	if ok, n := fits(probe); ok {
		fit, fitTokens = probe, n
		// Grow: the next character, then steps that double.
		for step := 0; fit < limit; {
			probe = after(fit)
			if step > 0 {
				probe = max(probe, runeBoundary(s.body, min(fit+step, limit)))
			}
			step = max(step*2, 4)
			ok, n := fits(probe)
			if !ok {
				over = probe
				break
			}
			fit, fitTokens = probe, n
		}
	} else {
		over = probe
		// Shrink by steps that double until one fits or start is reached.
		for step := 4; ; step *= 2 {
			probe = runeBoundary(s.body, max(over-step, start))
			if probe <= start {
				break
			}
			ok, n := fits(probe)
			if ok {
				fit, fitTokens = probe, n
				break
			}
			over = probe
		}
	}
	// Narrow down between the two.
	for over <= limit {
		mid := runeBoundary(s.body, fit+(over-fit)/2)
		if mid <= fit {
			// Halfway is inside the character after fit.
			if mid = after(fit); mid >= over {
				break
			}
		}
		if ok, n := fits(mid); ok {
			fit, fitTokens = mid, n
		} else {
			over = mid
		}
	}
	if fit == start {
		// One character counts more than size: it goes alone.
		end = after(start)
		return end, s.count(s.body[start:end])
	}
	return fit, fitTokens
}

// runeBoundary is the start of the character holding byte i.
func runeBoundary(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
