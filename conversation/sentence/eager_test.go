package sentence

import (
	"reflect"
	"testing"
)

// pushAll pushes the deltas one by one and returns the pieces each push
// handed out, then those of Flush.
func pushAll(s *Splitter, deltas ...string) [][]Piece {
	var out [][]Piece
	for _, d := range deltas {
		out = append(out, s.Push(nil, d))
	}
	return append(out, s.Flush(nil))
}

// With CutAtDeltaEnd a delta that ends where the piece certainly ends
// hands the piece out at once; an ending the next bytes could still undo
// waits for them, as without it.
func TestCutAtDeltaEnd(t *testing.T) {
	eager := Options{CutAtDeltaEnd: true, Emotions: emotions}
	eagerFirst := Options{CutAtDeltaEnd: true, FasterFirstResponse: true}
	for _, c := range []struct {
		name   string
		opts   Options
		deltas []string
		want   [][]Piece
	}{
		{"a sentence end after a word", eager, []string{"Hello", ".", " How", " are you", "?"},
			[][]Piece{nil, {say("Hello.", "Hello.")}, nil, nil, {say(" How are you?", "How are you?")}, nil}},
		{"closers wait", eager, []string{`He said "Stop."`, ` Then`},
			[][]Piece{nil, {say(`He said "Stop." `, `He said "Stop."`)}, {say("Then", "Then")}}},
		{"a question, an exclamation", eager, []string{"Why?", "Now!", " ok"},
			[][]Piece{{say("Why?", "Why?")}, {say("Now!", "Now!")}, nil, {say(" ok", "ok")}}},
		{"whitespace already there", eager, []string{"Done. ", "Next"},
			[][]Piece{{say("Done. ", "Done.")}, nil, {say("Next", "Next")}}},
		{"a decimal waits", eager, []string{"It is 3", ".", "5 m. ", "Ok"},
			[][]Piece{nil, nil, {say("It is 3.5 m. ", "It is 3.5 m.")}, nil, {say("Ok", "Ok")}}},
		{"an abbreviation waits", eager, []string{"Ask Dr", ".", " Who"},
			[][]Piece{nil, nil, nil, {say("Ask Dr. Who", "Ask Dr. Who")}}},
		{"an initial waits", eager, []string{"By J", ".", " K. Rowling"},
			[][]Piece{nil, nil, nil, {say("By J. K. Rowling", "By J. K. Rowling")}}},
		{"the pronoun does not", eager, []string{"So did I", ".", " Yes"},
			[][]Piece{nil, {say("So did I.", "So did I.")}, nil, {say(" Yes", "Yes")}}},
		{"No. before a number waits", eager, []string{"No", ".", " 5 won"},
			[][]Piece{nil, nil, nil, {say("No. 5 won", "No. 5 won")}}},
		{"a domain waits", eager, []string{"See www.example", ".", "com now"},
			[][]Piece{nil, nil, nil, {say("See www.example.com now", "See now")}}},
		{"www. starts a URL", eager, []string{"See www", ".", "example.com now"},
			[][]Piece{nil, nil, nil, {say("See www.example.com now", "See now")}}},
		{"a URL goes on past a mark", eager, []string{"Go to https://x.org/a", "?", "q=1 now"},
			[][]Piece{nil, nil, nil, {say("Go to https://x.org/a?q=1 now", "Go to now")}}},
		{"two dots wait, three do not", eager, []string{"Well", "..", ".", " so"},
			[][]Piece{nil, nil, {say("Well...", "Well...")}, nil, {say(" so", "so")}}},
		{"full-width marks", eager, []string{"你好", "。", "再见"},
			[][]Piece{nil, {say("你好。", "你好。")}, nil, {say("再见", "再见")}}},
		{"a first-piece comma after a word", eagerFirst, []string{"Sure", ",", " let me see, ok."},
			[][]Piece{nil, {say("Sure,", "Sure,")}, {say(" let me see, ok.", "let me see, ok.")}, nil}},
		{"a comma in a number waits", eagerFirst, []string{"About 1", ",", "000 people, yes"},
			[][]Piece{nil, nil, {say("About 1,000 people, ", "About 1,000 people,")}, {say("yes", "yes")}}},
		{"a newline", eager, []string{"- one\n", "- two"},
			[][]Piece{{say("- one\n", "one")}, nil, {say("- two", "two")}}},
		{"off: the next delta decides", plain, []string{"Hello", ".", " How"},
			[][]Piece{nil, nil, {say("Hello. ", "Hello.")}, {say("How", "How")}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := pushAll(New(c.opts), c.deltas...); !reflect.DeepEqual(got, c.want) {
				t.Errorf("deltas %q:\n got %#v\nwant %#v", c.deltas, got, c.want)
			}
		})
	}
}

func TestIsPlainWord(t *testing.T) {
	for word, want := range map[string]bool{
		"Hello": true, `"Stop`: true, "don't": true, "well-known": true, "I": true, "你": true, "héllo": true,
		"a": false, "J": false, "3": false, "v2": false, "example.com": false, "a@b": false, "http://x": false,
		"": false, "-": false, "word-": false, "(": false,
	} {
		if got := isPlainWord([]byte(word)); got != want {
			t.Errorf("isPlainWord(%q) = %v, want %v", word, got, want)
		}
	}
}
