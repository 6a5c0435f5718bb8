package sentence

import (
	"strings"
	"unicode/utf8"
)

// Options tune the splitter.
type Options struct {
	// FasterFirstResponse cuts the FIRST piece of a reply at its first comma-like mark
	// (", " "， " "、" "; " "；" — ASCII ones only when followed by whitespace; full-width ones at once),
	// so speech starts earlier. Later pieces cut only at sentence ends.
	FasterFirstResponse bool
	// FirstPieceMaxWords, if > 0, also cuts the first piece at a word boundary (whitespace)
	// once it holds that many words without having reached a mark. CJK text with no spaces: count runes/2 as words.
	FirstPieceMaxWords int
	// Emotions are the keywords recognised in square brackets, e.g. "joy" for "[joy]" (case-insensitive match, reported in the case given here).
	Emotions []string
	// MaxPieceRunes, if > 0, bounds a piece's Display to that many runes: a piece that
	// reaches it with no cut of its own is cut after its last whitespace, or, with none
	// (Chinese or Japanese text, one endless word), right there. 0 means no bound.
	MaxPieceRunes int
	// CutAtDeltaEnd hands a piece out as soon as a delta ends where the piece
	// certainly ends, instead of when the next delta shows what follows (see
	// "Cutting at a delta's end" in the package documentation).
	CutAtDeltaEnd bool
}

// Piece is one cut of the stream.
type Piece struct {
	Display  string   // the exact bytes of the stream that this piece covers
	Speech   string   // what to speak, cleaned; "" means a silent piece (nothing speakable)
	Emotions []string // emotion keywords found in this piece, in order (may repeat), nil if none
	Think    bool     // the piece lies inside a <think>…</think> block (Speech is "")
}

// fenceCutBytes is how long a piece inside a code fence may grow before it
// is cut at a newline, so long code still shows up progressively.
const fenceCutBytes = 512

// maxKeep is the largest buffer kept for reuse after Flush or Reset.
const maxKeep = 64 << 10

type mode uint8

const (
	modeText     mode = iota
	modeThink         // inside <think>…</think>
	modeFence         // inside a ``` code fence
	modeFenceEnd      // on the closing ``` line, until its newline
)

// cutState is what the runes just seen say about ending the piece.
type cutState uint8

const (
	cutNone        cutState = iota
	cutMarkASCII            // after . ! ? (and closers): whitespace next ends the sentence
	cutMarkFull             // after 。！？… (or a first-piece ，、；): ends unless a closer follows
	cutComma                // after a first-piece , or ;: whitespace next cuts
	cutPending              // ended: whitespace joins the piece, anything else starts the next
	cutPendingMark          // ended by a mark: whitespace and emoji join the piece
	cutPendingNo            // after "No. ": ended unless a digit follows ("No. 5")
)

type tagMatch uint8

const (
	tagNone tagMatch = iota
	tagWait          // could be a tag: wait for more bytes
	tagOpen
	tagClose
)

const (
	openTag  = "<think>"
	closeTag = "</think>"
)

// Splitter cuts one reply at a time. It is not safe for concurrent use.
type Splitter struct {
	opts Options
	buf  []byte // the current piece from start, then bytes not yet scanned from pos
	scanState
	// pieceStart is the scan state where the current piece began, kept
	// when MaxPieceRunes is set: a piece cut at its last whitespace is
	// scanned again from there up to the cut (see cutLong).
	pieceStart scanState
}

// scanState is everything the scan knows at one position of the stream.
type scanState struct {
	start int
	pos   int

	mode      mode
	firstDone bool // a non-think piece with speech was emitted
	// The stream's current line: only indentation (and backticks) so far,
	// and how many backticks open it.
	lineBlank bool
	lineTicks int

	st        cutState
	markPos   int  // the first mark of the run, for cutMarkASCII
	markDot   bool // the run is a single '.' so far
	markBang  bool // the run holds '!' or '?'
	markClose bool // closers followed the run

	// The word being scanned, for abbreviations.
	wordStart     int
	wordLineStart bool
	prevSpace     bool

	// The piece being scanned.
	think         bool // Think piece
	silent        bool // code fence: nothing spoken
	rawLetters    bool // letters anywhere (think pieces)
	nonSpace      bool
	words         int // spoken words ended by whitespace
	cjk           int // spoken CJK runes
	wordHasLetter bool
	prevCJK       bool
	runes         int // runes in the piece so far
	lastSpaceEnd  int // just past the piece's last whitespace rune; <= start if none
	emotions      []string
	sp            speech
}

// New returns a splitter for the given options.
func New(opts Options) *Splitter {
	s := &Splitter{opts: opts}
	s.opts.Emotions = append([]string(nil), opts.Emotions...)
	s.Reset()
	return s
}

// Push feeds one delta and appends the pieces it completed to dst (pass nil
// or a reused slice).
func (s *Splitter) Push(dst []Piece, delta string) []Piece {
	if len(delta) == 0 {
		return dst
	}
	if s.start > 0 {
		// Drop emitted bytes once per delta, not once per piece. A cut falls
		// inside the last delta (or the few bytes held back before it, or at
		// most MaxPieceRunes runes back), so what moves here is never more
		// than that: a long unfinished piece is never copied again.
		n := copy(s.buf, s.buf[s.start:])
		s.buf = s.buf[:n]
		s.pieceStart.shift(s.start)
		s.shift(s.start)
	}
	s.buf = append(s.buf, delta...)
	dst = s.scan(dst, false)
	if s.opts.CutAtDeltaEnd && s.pos == len(s.buf) && s.pos > s.start && s.endIsCertain() {
		dst = s.emit(dst, s.pos)
	}
	return dst
}

// endIsCertain reports whether the piece ends where the scan stopped, at
// the end of everything pushed, whatever comes next: what follows could
// only be whitespace that would have joined it, or the next piece.
func (s *Splitter) endIsCertain() bool {
	if s.think || s.silent {
		// Nothing to speak: no one waits for the piece, and the
		// whitespace after "</think>" or a fence stays with it.
		return false
	}
	if s.sp.pend != 0 {
		return false // the next rune decides what a '*' or '<' means
	}
	switch s.st {
	case cutPending, cutPendingMark:
		return true
	}
	if s.sp.wordHasURL() {
		return false // the mark may sit inside a URL, which goes on
	}
	switch s.st {
	case cutMarkFull:
		return true
	case cutComma:
		// The mark is the last byte: "Well," ends a first piece; "1," may
		// be "1,000".
		return isPlainWord(s.buf[max(s.wordStart, s.start) : s.pos-1])
	case cutMarkASCII:
		if s.markClose {
			// `"Fine."` may go on: `"Fine."라고` quotes inside a sentence.
			return false
		}
		word := s.buf[max(s.wordStart, s.start):s.markPos]
		switch {
		case s.markBang:
			// "Why?" ends; "5!" may be a factorial, "http://x?" a URL.
			return isPlainWord(word)
		case !s.markDot:
			// Dots: an ellipsis once there are three; fewer may be
			// the start of one.
			return dotRun(s.buf[s.markPos:s.pos]) >= 3
		}
		// One period, maybe with closers after it: certain after a plain
		// word; after a number, an initial, an abbreviation, a domain or
		// anything else the next bytes decide ("www." starts a URL).
		return isPlainWord(word) && !equalFold(stripOpeners(word), "www") && classifyWord(s.buf[max(s.wordStart, s.start):s.markPos+1], false) == wordEnds
	}
	return false
}

// Flush ends the stream: appends whatever is left (if it is non-empty) and
// resets the splitter for reuse.
func (s *Splitter) Flush(dst []Piece) []Piece {
	dst = s.scan(dst, true)
	if s.start < len(s.buf) {
		dst = s.emit(dst, len(s.buf))
	}
	s.Reset()
	return dst
}

// shift moves the positions back by n bytes dropped from the buffer's
// start.
func (st *scanState) shift(n int) {
	st.start -= n
	st.pos -= n
	st.wordStart -= n
	st.markPos -= n
	st.lastSpaceEnd -= n
}

// Reset drops any buffered text (e.g. on interrupt) so the splitter can be
// reused.
func (s *Splitter) Reset() {
	buf := s.buf[:0]
	if cap(buf) > maxKeep {
		buf = nil
	}
	*s = Splitter{
		opts: s.opts,
		buf:  buf,
		scanState: scanState{
			lineBlank: true,
			emotions:  s.emotions[:0],
			sp:        s.sp,
		},
	}
	s.sp.reset()
	s.pieceStart = s.scanState
}

// scan looks at every rune not yet scanned. It stops early at an
// incomplete rune or a possible tag at the end of the buffer unless final.
func (s *Splitter) scan(dst []Piece, final bool) []Piece {
	return s.scanTo(dst, final, len(s.buf), s.opts.MaxPieceRunes)
}

// scanTo scans up to end, cutting pieces at limit runes when limit > 0.
func (s *Splitter) scanTo(dst []Piece, final bool, end, limit int) []Piece {
	for s.pos < end {
		if s.st == cutNone && !s.prevSpace && !s.lineBlank && s.nonSpace {
			stop := end
			if limit > 0 {
				stop = min(stop, s.pos+max(0, limit-s.runes))
			}
			if s.skipLetters(stop) {
				continue
			}
		}
		b := s.buf[s.pos:]
		r, n := rune(b[0]), 1
		if r >= utf8.RuneSelf {
			if !final && !utf8.FullRune(b) {
				break
			}
			r, n = utf8.DecodeRune(b)
		}

		tag := tagNone
		if r == '<' && (s.mode == modeText || s.mode == modeThink) {
			if tag = s.matchTag(b, final); tag == tagWait {
				break
			}
		}

		space := isSpace(r)
		fall := true // r may start a new cut state
		switch {
		case tag == tagClose:
			// "</think>" closes the think piece it is in, even right after
			// a sentence end.
			s.st = cutNone
		case s.st != cutNone:
			var cut bool
			if cut, fall = s.decide(r, space); cut {
				dst = s.emit(dst, s.pos)
			}
		case s.prevCJK && isCJK(r) && s.maxWordsOn() && s.wordCount() >= s.opts.FirstPieceMaxWords:
			dst = s.emit(dst, s.pos)
		}
		if tag == tagOpen && s.nonSpace {
			dst = s.emit(dst, s.pos)
		}

		if limit > 0 && s.pos > s.start {
			need := 1
			switch tag {
			case tagOpen:
				need = len(openTag)
			case tagClose:
				need = len(closeTag)
			}
			if s.runes+need > limit {
				// No cut of its own came in time; r is looked at again
				// as the next piece's, or later still if the cut falls
				// further back.
				dst = s.cutLong(dst, final)
				continue
			}
		}

		switch tag {
		case tagOpen:
			s.mode = modeThink
			s.think = true
			s.st = cutNone
			s.skipTag(len(openTag))
			continue
		case tagClose:
			s.mode = modeText
			s.st = cutPending
			s.sp.lineStart = true
			s.skipTag(len(closeTag))
			continue
		}

		s.step(r, b[:n], space, fall)
		s.pos += n
	}
	return dst
}

// cutLong ends a piece that is full (MaxPieceRunes) before the rune at pos:
// after its last whitespace, or at pos if it has none, which is a rune
// boundary too. The state at a cut further back is gone, so the piece is
// scanned again from its start up to there; the runes after the cut are
// then scanned again as the next piece's, which they are. A piece costs at
// most two more scans of its runes, so the cost stays linear.
func (s *Splitter) cutLong(dst []Piece, final bool) []Piece {
	cut := s.pos
	if s.lastSpaceEnd > s.start {
		cut = s.lastSpaceEnd
	}
	if cut < s.pos {
		out, emotions := s.sp.out[:0], s.emotions[:0] // keep the grown buffers
		s.scanState = s.pieceStart
		s.sp.out, s.emotions = out, emotions
		// The piece has no cut before the one it is now given: this scan
		// only rebuilds the state (final only matters at the buffer's end).
		dst = s.scanTo(dst, final, cut, 0)
	}
	return s.emit(dst, cut)
}

// skipLetters is the fast path for the bulk of a reply: a run of ASCII
// letters and digits inside a word changes no state but the counts. It
// stops at stop and reports whether it moved.
func (s *Splitter) skipLetters(stop int) bool {
	sp := &s.sp
	text := s.think || s.silent
	if !text && (!sp.inWord || sp.pend != 0 || sp.paren > 0 || sp.square > 0 || sp.star || sp.angle) {
		return false
	}
	i := s.pos
	for i < stop && asciiWord[s.buf[i]] {
		i++
	}
	if i == s.pos {
		return false
	}
	if text {
		s.rawLetters = true
	} else {
		sp.out = append(sp.out, s.buf[s.pos:i]...)
		sp.letters += i - s.pos
		s.wordHasLetter = true
		// The face rule looks at the runes before a parenthesis: "a:b(c"
		// is no ":(".
		if i-s.pos >= 2 {
			sp.prev2 = rune(s.buf[i-2])
		} else {
			sp.prev2 = sp.prev
		}
		sp.prev = rune(s.buf[i-1])
	}
	s.prevCJK = false
	s.runes += i - s.pos
	s.pos = i
	return true
}

// asciiWord marks the bytes of ASCII letters and digits.
var asciiWord = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	return t
}()

// matchTag tells whether b starts with the think tag the mode looks for.
func (s *Splitter) matchTag(b []byte, final bool) tagMatch {
	want, kind := openTag, tagOpen
	if s.mode == modeThink {
		want, kind = closeTag, tagClose
	}
	if !equalFoldPrefix(b, want) {
		return tagNone
	}
	if len(b) < len(want) {
		if final {
			return tagNone
		}
		return tagWait
	}
	return kind
}

// skipTag moves over a think tag, which is displayed but never spoken.
func (s *Splitter) skipTag(n int) {
	if s.prevSpace || s.pos == s.start {
		s.wordStart = s.pos
		s.wordLineStart = false
		s.prevSpace = false
	}
	s.pos += n
	s.runes += n
	s.nonSpace = true
	s.lineBlank = false
	s.prevCJK = false
}

// decide applies the pending cut state to the next rune r: whether the
// piece ends before r, and whether r may then start a cut state of its own.
func (s *Splitter) decide(r rune, space bool) (cut, fall bool) {
	switch s.st {
	case cutPendingMark:
		// An emoji after the space still belongs to the sentence: "Great! 😀 ".
		if space || r >= utf8.RuneSelf && isEmoji(r) {
			return false, false
		}
		s.st = cutNone
		return true, true
	case cutPending:
		if space {
			return false, false
		}
		s.st = cutNone
		return true, true
	case cutPendingNo:
		if space {
			return false, false
		}
		s.st = cutNone
		return !isASCIIDigit(r), true
	case cutMarkFull:
		if space {
			s.st = cutPendingMark
			return false, false
		}
		if isFullStop(r) || r == '.' || r == '!' || r == '?' || isCloser(r) {
			return false, false
		}
		s.st = cutNone
		return true, true
	case cutComma:
		if space {
			s.st = cutPendingMark
			return false, false
		}
		s.st = cutNone
		return false, true
	case cutMarkASCII:
		switch {
		case r == '.' || r == '!' || r == '?':
			s.markDot = false
			s.markBang = s.markBang || r != '.'
			return false, false
		case isFullStop(r):
			s.st = cutMarkFull
			return false, false
		case isCloser(r):
			s.markClose = true
			return false, false
		case space:
			s.st = s.afterPeriod()
			return false, s.st == cutNone
		case s.markBang && (isCJK(r) || isHangul(r)):
			// "すごい!次は": CJK text often puts ASCII marks without a space.
			s.st = cutNone
			return true, true
		}
		s.st = cutNone
		return false, true
	}
	return false, true
}

// afterPeriod decides what an ASCII mark run followed by whitespace means.
func (s *Splitter) afterPeriod() cutState {
	if !s.markDot || s.markClose {
		return cutPendingMark
	}
	ws, atStart := max(s.wordStart, s.start), s.wordLineStart
	// A piece cut at a delta's end may start with the whitespace and
	// emoji that would have joined the one before: a word right after
	// them still opens the piece.
	if lead := s.start + trailers(s.buf[s.start:s.markPos]); ws <= lead {
		ws, atStart = lead, true
	}
	switch classifyWord(s.buf[ws:s.markPos+1], atStart) {
	case wordAbbrev:
		return cutNone
	case wordEndsUnlessNumber:
		return cutPendingNo
	}
	return cutPendingMark
}

// step takes rune r (bytes b) into the current piece.
func (s *Splitter) step(r rune, b []byte, space, fall bool) {
	s.runes++
	if space {
		s.prevSpace = true
		s.lastSpaceEnd = s.pos + len(b)
	} else {
		if s.prevSpace || s.pos == s.start {
			s.wordStart = s.pos
			s.wordLineStart = s.lineBlank
			s.prevSpace = false
		}
		s.nonSpace = true
	}

	spoken := false
	if s.think || s.silent {
		s.rawLetters = s.rawLetters || isWordRune(r)
	} else {
		spoken = s.sp.speak(r, b, space, s.opts.Emotions, &s.emotions)
	}
	s.prevCJK = false
	if spoken {
		if isCJK(r) {
			s.cjk++
			s.prevCJK = true
		} else if isWordRune(r) {
			s.wordHasLetter = true
		}
	}
	if space && s.wordHasLetter {
		s.words++
		s.wordHasLetter = false
	}

	switch {
	case r == '\n':
		s.lineBlank = true
		s.lineTicks = 0
		if s.mode == modeFenceEnd {
			s.mode = modeText
			s.st = cutPending
			s.sp.lineStart = true // the speech cleaner did not see the fence's lines
			return
		}
	case r == '`' && s.lineBlank:
		if s.lineTicks++; s.lineTicks == 3 {
			s.toggleFence()
			return
		}
	case space:
		if s.lineTicks > 0 {
			s.lineBlank = false
		}
	default:
		s.lineBlank = false
	}

	if !fall || s.mode == modeFenceEnd {
		return
	}
	if s.silent {
		if r == '\n' && s.pos+1-s.start >= fenceCutBytes {
			s.st = cutPending
		}
		return
	}
	speakable := s.rawLetters
	if !s.think {
		speakable = s.sp.letters > 0
	}
	if !speakable {
		return
	}
	switch r {
	case '.', '!', '?':
		s.st = cutMarkASCII
		s.markPos = s.pos
		s.markDot = r == '.'
		s.markBang = r != '.'
		s.markClose = false
		return
	case '\n':
		s.st = cutPending
		return
	}
	if isFullStop(r) {
		s.st = cutMarkFull
		return
	}
	if !s.firstOn() {
		return
	}
	if s.opts.FasterFirstResponse {
		switch r {
		case ',', ';':
			s.st = cutComma
			return
		case '，', '、', '；':
			s.st = cutMarkFull
			return
		}
	}
	if space && s.opts.FirstPieceMaxWords > 0 && s.wordCount() >= s.opts.FirstPieceMaxWords {
		s.st = cutPending
	}
}

// toggleFence opens or closes a code fence at a line's third backtick.
// Think blocks keep their backticks as text.
func (s *Splitter) toggleFence() {
	switch {
	case s.mode == modeText && !s.think:
		s.mode = modeFence
		s.silent = true
		s.st = cutNone
	case s.mode == modeFence:
		s.mode = modeFenceEnd
	}
}

// firstOn reports whether the piece is the reply's first spoken one, which
// FasterFirstResponse and FirstPieceMaxWords cut early.
func (s *Splitter) firstOn() bool {
	return !s.firstDone && !s.think && !s.silent && s.mode == modeText
}

func (s *Splitter) maxWordsOn() bool {
	return s.opts.FirstPieceMaxWords > 0 && s.firstOn()
}

func (s *Splitter) wordCount() int { return s.words + s.cjk/2 }

// emit ends the piece at end and starts the next one there.
func (s *Splitter) emit(dst []Piece, end int) []Piece {
	display := s.buf[s.start:end]
	var speech []byte
	if !s.think && !s.silent {
		s.sp.endWord()
		if s.sp.letters > 0 {
			speech = s.sp.out
		}
	}
	// One allocation holds both texts.
	var sb strings.Builder
	sb.Grow(len(display) + len(speech))
	sb.Write(display)
	sb.Write(speech)
	text := sb.String()
	p := Piece{Display: text[:len(display)], Speech: text[len(display):], Think: s.think}
	if len(s.emotions) > 0 {
		p.Emotions = append([]string(nil), s.emotions...)
	}
	dst = append(dst, p)
	if !s.think && p.Speech != "" {
		s.firstDone = true
	}

	s.start = end
	s.st = cutNone
	s.think = s.mode == modeThink
	s.silent = s.mode == modeFence || s.mode == modeFenceEnd
	s.rawLetters = false
	s.nonSpace = false
	s.words, s.cjk = 0, 0
	s.wordHasLetter = false
	s.prevCJK = false
	s.runes = 0
	s.emotions = s.emotions[:0]
	s.sp.newPiece()
	if s.opts.MaxPieceRunes > 0 {
		s.pieceStart = s.scanState
	}
	return dst
}
