package sentence

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSplitter checks the invariant for arbitrary bytes cut at arbitrary
// points: the pieces give back the input exactly, none is empty, and the
// way the text was cut into deltas changes nothing at all.
func FuzzSplitter(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in, []byte{3, 1, 4, 1, 5, 9, 2, 6}, c.opts.FasterFirstResponse, uint8(c.opts.FirstPieceMaxWords))
	}
	f.Add("<th", []byte{1}, false, uint8(0))
	f.Add("\xe4\xbd\xa0\xe5\xa5", []byte{2}, true, uint8(1))
	f.Fuzz(func(t *testing.T, in string, cuts []byte, faster bool, maxWords uint8) {
		opts := Options{
			FasterFirstResponse: faster,
			FirstPieceMaxWords:  int(maxWords % 16),
			Emotions:            []string{"joy", "Sad"},
		}
		s := New(opts)
		want := s.Flush(s.Push(nil, in))
		checkPieces(t, in, want)

		// The same splitter, reused, fed the same text in the fuzzed cuts.
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
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cut %v:\n got %#v\nwant %#v", cuts, got, want)
		}
	})
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
