package sentence

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSplitter checks the invariants for arbitrary bytes cut at arbitrary
// points: the pieces give back the input exactly, none is empty, and the
// way the text was cut into deltas changes nothing at all. With
// MaxPieceRunes set as well: no piece is longer (a think tag, never split,
// is the one exception), the pieces are the same as without it when none
// was longer anyway, and when every cut could fall at whitespace the same
// words and emotions are spoken.
func FuzzSplitter(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in, []byte{3, 1, 4, 1, 5, 9, 2, 6}, c.opts.FasterFirstResponse, uint8(c.opts.FirstPieceMaxWords), uint8(c.opts.MaxPieceRunes))
	}
	f.Add("<th", []byte{1}, false, uint8(0), uint8(0))
	f.Add("\xe4\xbd\xa0\xe5\xa5", []byte{2}, true, uint8(1), uint8(1))
	f.Add("one two three four five six seven eight nine ten", []byte{1}, false, uint8(0), uint8(11))
	f.Add("我们今天在这里讨论一个没有句号的很长的回答", []byte{2, 3}, false, uint8(2), uint8(7))
	f.Add("a <think>b c d e f</think> g h", []byte{4}, false, uint8(0), uint8(3))
	f.Add("[ joy ] (an aside that goes on) and *waves at* you https://x.org/a b", []byte{5, 1}, true, uint8(3), uint8(13))
	f.Fuzz(func(t *testing.T, in string, cuts []byte, faster bool, maxWords, maxRunes uint8) {
		opts := Options{
			FasterFirstResponse: faster,
			FirstPieceMaxWords:  int(maxWords % 16),
			Emotions:            []string{"joy", "Sad"},
		}
		want := splitBoth(t, New(opts), in, cuts)
		checkPieces(t, in, want)
		checkEager(t, opts, in, cuts, want)

		opts.MaxPieceRunes = 1 + int(maxRunes%64)
		got := splitBoth(t, New(opts), in, cuts)
		checkPieces(t, in, got)
		limit := max(opts.MaxPieceRunes, len(closeTag))
		for i, p := range got {
			if n := utf8.RuneCountInString(p.Display); n > limit {
				t.Fatalf("MaxPieceRunes %d: piece %d has %d runes: %q", opts.MaxPieceRunes, i, n, p.Display)
			}
		}
		if longestPiece(want) <= opts.MaxPieceRunes && !reflect.DeepEqual(got, want) {
			t.Fatalf("MaxPieceRunes %d, no longer piece, yet other pieces:\n got %#v\nwant %#v", opts.MaxPieceRunes, got, want)
		}
		if longestWord(in) < opts.MaxPieceRunes-len(closeTag) {
			if g, w := spokenWords(got), spokenWords(want); g != w {
				t.Fatalf("MaxPieceRunes %d speaks other words:\n got %q\nwant %q", opts.MaxPieceRunes, g, w)
			}
			if g, w := allEmotions(got), allEmotions(want); !reflect.DeepEqual(g, w) {
				t.Fatalf("MaxPieceRunes %d finds other emotions: %q, want %q", opts.MaxPieceRunes, g, w)
			}
		}
	})
}

// checkEager checks CutAtDeltaEnd against the pieces without it (want):
// the same words and emotions are spoken, and every cut is one of want's
// or falls where a delta ended, which is the only place it may add one.
// The first-piece options are the exception to the last rule: an early
// cut ends the first piece sooner, so the cuts that only a first piece
// gets (and those it spares, such as a newline's) fall elsewhere.
func checkEager(t *testing.T, opts Options, in string, cuts []byte, want []Piece) {
	t.Helper()
	opts.CutAtDeltaEnd = true
	s := New(opts)
	var got []Piece
	deltaEnds := map[int]bool{}
	rest, at := in, 0
	for i := 0; len(rest) > 0; i++ {
		n := len(rest)
		if len(cuts) > 0 {
			n = min(n, 1+int(cuts[i%len(cuts)])%8)
		}
		got = s.Push(got, rest[:n])
		rest, at = rest[n:], at+n
		deltaEnds[at] = true
	}
	got = s.Flush(got)
	checkPieces(t, in, got)
	if g, w := spokenWords(got), spokenWords(want); g != w {
		t.Fatalf("CutAtDeltaEnd speaks other words:\n got %q\nwant %q", g, w)
	}
	if g, w := allEmotions(got), allEmotions(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("CutAtDeltaEnd finds other emotions: %q, want %q", g, w)
	}
	if opts.FasterFirstResponse || opts.FirstPieceMaxWords > 0 {
		return
	}
	wantEnds := map[int]bool{}
	end := 0
	for _, p := range want {
		end += len(p.Display)
		wantEnds[end] = true
	}
	end = 0
	for i, p := range got {
		end += len(p.Display)
		if !wantEnds[end] && !deltaEnds[end] {
			t.Fatalf("CutAtDeltaEnd: piece %d ends at byte %d, neither a cut without it nor a delta's end:\n got %#v\nwant %#v", i, end, got, want)
		}
	}
}

// splitBoth splits in whole, and again with the same splitter, reused, in
// the fuzzed cuts; both must give the same pieces.
func splitBoth(t *testing.T, s *Splitter, in string, cuts []byte) []Piece {
	t.Helper()
	whole := s.Flush(s.Push(nil, in))
	var got []Piece
	rest := in
	for i := 0; len(rest) > 0; i++ {
		n := len(rest)
		if len(cuts) > 0 {
			n = min(n, 1+int(cuts[i%len(cuts)])%8)
		}
		got = s.Push(got, rest[:n])
		rest = rest[n:]
	}
	got = s.Flush(got)
	if !reflect.DeepEqual(got, whole) {
		t.Fatalf("cut %v, MaxPieceRunes %d:\n got %#v\nwant %#v", cuts, s.opts.MaxPieceRunes, got, whole)
	}
	return whole
}

func longestPiece(pieces []Piece) int {
	n := 0
	for _, p := range pieces {
		n = max(n, utf8.RuneCountInString(p.Display))
	}
	return n
}

// longestWord is the most runes in a row without whitespace.
func longestWord(s string) int {
	longest, n := 0, 0
	for _, r := range s {
		if isSpace(r) {
			n = 0
			continue
		}
		n++
		longest = max(longest, n)
	}
	return longest
}

// spokenWords is the letters and digits of all the speech, in order.
func spokenWords(pieces []Piece) string {
	var b strings.Builder
	for _, p := range pieces {
		for _, r := range p.Speech {
			if isWordRune(r) {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

func allEmotions(pieces []Piece) []string {
	var all []string
	for _, p := range pieces {
		all = append(all, p.Emotions...)
	}
	return all
}

func checkPieces(t *testing.T, in string, pieces []Piece) {
	t.Helper()
	var all strings.Builder
	for i, p := range pieces {
		if p.Display == "" {
			t.Fatalf("piece %d has an empty Display: %#v", i, pieces)
		}
		all.WriteString(p.Display)
		if p.Think && (p.Speech != "" || p.Emotions != nil) {
			t.Fatalf("think piece %d speaks: %#v", i, p)
		}
		if p.Speech != strings.TrimSpace(p.Speech) || strings.Contains(p.Speech, "  ") {
			t.Fatalf("piece %d: speech not trimmed and collapsed: %q", i, p.Speech)
		}
		if !utf8.ValidString(p.Speech) {
			t.Fatalf("piece %d: speech is not UTF-8: %q", i, p.Speech)
		}
		for _, r := range p.Speech {
			if strings.ContainsRune("[]()<>`*_~|（）", r) || isEmoji(r) || isSpace(r) && r != ' ' || r < ' ' {
				t.Fatalf("piece %d: %q spoken in %q", i, r, p.Speech)
			}
		}
		if p.Emotions != nil && len(p.Emotions) == 0 {
			t.Fatalf("piece %d: empty, non-nil Emotions", i)
		}
	}
	if all.String() != in {
		t.Fatalf("pieces do not join to the input:\n got %q\nwant %q", all.String(), in)
	}
}
