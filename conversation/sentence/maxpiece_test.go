package sentence

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMaxPieceRunes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		in   string
		want []Piece
	}{
		{"cut after the last whitespace", Options{MaxPieceRunes: 10}, "one two three four five six", []Piece{
			say("one two ", "one two"), say("three ", "three"), say("four five ", "four five"), say("six", "six"),
		}},
		{"a full piece ending in whitespace", Options{MaxPieceRunes: 4}, "abc de", []Piece{
			say("abc ", "abc"), say("de", "de"),
		}},
		{"no whitespace: at the limit", Options{MaxPieceRunes: 7}, "我们今天在这里讨论一个没有句号的很长的回答", []Piece{
			say("我们今天在这里", "我们今天在这里"), say("讨论一个没有句", "讨论一个没有句"), say("号的很长的回答", "号的很长的回答"),
		}},
		{"one long word", Options{MaxPieceRunes: 5}, "ab abcdefghijkl", []Piece{
			say("ab ", "ab"), say("abcde", "abcde"), say("fghij", "fghij"), say("kl", "kl"),
		}},
		{"a sentence end comes first", Options{MaxPieceRunes: 12}, "Hi there. Good day to you", []Piece{
			say("Hi there. ", "Hi there."), say("Good day to ", "Good day to"), say("you", "you"),
		}},
		{"an aside carries over", Options{MaxPieceRunes: 12}, "So (this aside goes on and on) then we go", []Piece{
			say("So (this ", "So"), silent("aside goes "), silent("on and on) "), say("then we go", "then we go"),
		}},
		{"an emotion split by a cut", Options{MaxPieceRunes: 6, Emotions: []string{"joy"}}, "[ joy ] is here", []Piece{
			silent("[ joy "), say("] is ", "is", "joy"), say("here", "here"),
		}},
		{"think tags are not split", Options{MaxPieceRunes: 5}, "a<think>b c</think>d", []Piece{
			say("a", "a"), think("<think>"), think("b "), think("c"), think("</think>"), say("d", "d"),
		}},
		{"first piece cut early before the limit", Options{MaxPieceRunes: 100, FirstPieceMaxWords: 3}, "one two three four five six seven", []Piece{
			say("one two three ", "one two three"), say("four five six seven", "four five six seven"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.opts)
			got := s.Flush(s.Push(nil, tc.in))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
			checkPieces(t, tc.in, got)
			// Rune by rune: the same pieces.
			var byRune []Piece
			for _, r := range tc.in {
				byRune = s.Push(byRune, string(r))
			}
			if byRune = s.Flush(byRune); !reflect.DeepEqual(byRune, tc.want) {
				t.Fatalf("rune by rune:\ngot  %#v\nwant %#v", byRune, tc.want)
			}
		})
	}
}

// TestMaxPieceRunesStream is the fast model that never ends a sentence:
// 2 MB of words in deltas of 1–4 bytes. Pieces come out as the text
// streams in, none longer than the limit, and the splitter holds no more
// than about one piece.
func TestMaxPieceRunesStream(t *testing.T) {
	const limit = 400
	text := strings.Repeat("lorem ipsum dolor sit amet, consectetur adipiscing elit ", 2<<20/56)
	s := New(Options{MaxPieceRunes: limit})
	var pieces []Piece
	held := 0
	for i, rest := 0, text; len(rest) > 0; i++ {
		n := min(len(rest), 1+(i*7)%4)
		pieces = s.Push(pieces, rest[:n])
		rest = rest[n:]
		held = max(held, len(s.buf)-s.start)
	}
	pieces = s.Flush(pieces)
	checkPieces(t, text, pieces)
	if held > limit+4 {
		t.Errorf("the splitter held %d bytes of an unfinished piece, want at most the %d-rune limit", held, limit)
	}
	for i, p := range pieces[:len(pieces)-1] {
		if n := utf8.RuneCountInString(p.Display); n > limit || n < limit-len("consectetur ") || !strings.HasSuffix(p.Display, " ") {
			t.Fatalf("piece %d: %d runes %q; want up to %d, cut after a space", i, n, p.Display, limit)
		}
		if p.Speech != strings.TrimSpace(p.Display) {
			t.Fatalf("piece %d speaks %q", i, p.Speech)
		}
	}
}
