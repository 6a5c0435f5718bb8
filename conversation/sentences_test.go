package conversation

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// cut pushes chunks in order and returns the completed sentences and the
// flushed tail.
func cut(chunks []string) (sentences []string, tail string) {
	var c sentenceCutter
	for _, ch := range chunks {
		sentences = append(sentences, c.Push(ch)...)
	}
	return sentences, c.Flush()
}

func TestSentenceCutter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		text      string
		sentences []string
		tail      string
	}{
		{"two sentences", "Hello. How are you?", []string{"Hello. "}, "How are you?"},
		{"ends with whitespace", "Hello. How are you? ", []string{"Hello. ", "How are you? "}, ""},
		{"decimal", "Pi is 3.14 today. Yes", []string{"Pi is 3.14 today. "}, "Yes"},
		{"title abbreviation", "Mr. Smith is here. Ok", []string{"Mr. Smith is here. "}, "Ok"},
		{"several abbreviations", "Dr. Who and Mrs. Hudson met St. Paul. Fine", []string{"Dr. Who and Mrs. Hudson met St. Paul. "}, "Fine"},
		{"e.g.", "e.g. this", nil, "e.g. this"},
		{"E.g. capitalised", "E.g. this one. Next", []string{"E.g. this one. "}, "Next"},
		{"i.e. in parentheses", "Tea (i.e. green) is nice. Yes", []string{"Tea (i.e. green) is nice. "}, "Yes"},
		{"etc. is an abbreviation", "Apples, pears etc. are fruit.", nil, "Apples, pears etc. are fruit."},
		{"CJK", "你好。今天好吗？", []string{"你好。", "今天好吗？"}, ""},
		{"CJK exclamation and tail", "好！再见", []string{"好！"}, "再见"},
		{"full-width ellipsis", "嗯…好", []string{"嗯…"}, "好"},
		{"ellipsis", "Wait... what?", []string{"Wait... "}, "what?"},
		{"exclamation", "Wow! Really? Yes.", []string{"Wow! ", "Really? "}, "Yes."},
		{"repeated marks", "What?! No!! ok", []string{"What?! ", "No!! "}, "ok"},
		{"newline ends a sentence", "One.\nTwo.", []string{"One.\n"}, "Two."},
		{"extra whitespace starts the next piece", "One.  Two", []string{"One. "}, " Two"},
		{"no space after the mark", "a.b!c?d", nil, "a.b!c?d"},
		{"mark at the very start", ". x", []string{". "}, "x"},
		{"only whitespace", "   ", nil, "   "},
		{"empty", "", nil, ""},
		{"no punctuation", "just words here", nil, "just words here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Whole text in one push, rune by rune, and as the fake LLM's
			// word-like deltas: the cuts must not depend on chunking.
			for _, chunks := range [][]string{{tc.text}, runes(tc.text), words(tc.text)} {
				sentences, tail := cut(chunks)
				if !reflect.DeepEqual(sentences, tc.sentences) || tail != tc.tail {
					t.Errorf("chunks %q: sentences %q + tail %q, want %q + %q", chunks, sentences, tail, tc.sentences, tc.tail)
				}
			}
		})
	}
}

func TestSentenceCutterReuseAfterFlush(t *testing.T) {
	var c sentenceCutter
	if got := c.Push("Half a sen"); len(got) != 0 {
		t.Fatalf("Push = %q", got)
	}
	if got := c.Flush(); got != "Half a sen" {
		t.Fatalf("Flush = %q", got)
	}
	if got := c.Flush(); got != "" {
		t.Errorf("second Flush = %q, want empty", got)
	}
	if got := c.Push("New. "); !reflect.DeepEqual(got, []string{"New. "}) {
		t.Errorf("Push after Flush = %q, want [\"New. \"]", got)
	}
}

func runes(s string) []string {
	var out []string
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

// words splits like a tokenizer would: each word with its leading space.
func words(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if r == ' ' && i > start {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// FuzzSentenceCutter checks that for any text, however it is chunked, the
// pieces concatenate back to exactly the text, and that for chunks of valid
// UTF-8 the pieces do not depend on the chunking. sizes drives the chunk
// lengths in bytes (0 makes an empty delta).
func FuzzSentenceCutter(f *testing.F) {
	for _, seed := range []struct {
		text  string
		sizes []byte
	}{
		{"Hello. How are you?", []byte{3, 1, 7}},
		{"Pi is 3.14 today. Yes", []byte{10, 1}},
		{"Mr. Smith is here. Ok", []byte{2, 0, 2}},
		{"e.g. this", []byte{1}},
		{"你好。今天好吗？", []byte{3, 3, 3}},
		{"你好。今天好吗？", []byte{1, 2, 4}},
		{"Wait... what?", []byte{4, 0, 1, 1}},
		{"Wow! Really?  Yes.\n\nNext", []byte{5}},
		{"嗯…好 ok. fine", []byte{2}},
		{"", nil},
		{"\xff\xfe. x", []byte{1}},
		{"a\u00a0b. \u3000c", []byte{1, 1, 1}},
	} {
		f.Add(seed.text, seed.sizes)
	}
	f.Fuzz(func(t *testing.T, text string, sizes []byte) {
		chunks := split(text, sizes)
		sentences, tail := cut(chunks)
		got := strings.Join(sentences, "") + tail
		if got != text {
			t.Fatalf("chunks %q: pieces %q + tail %q join to %q, want %q", chunks, sentences, tail, got, text)
		}
		for _, s := range sentences {
			if s == "" {
				t.Errorf("chunks %q: empty sentence in %q", chunks, sentences)
			}
		}
		for _, ch := range chunks {
			if !utf8.ValidString(ch) {
				return
			}
		}
		whole, wholeTail := cut([]string{text})
		if !reflect.DeepEqual(sentences, whole) || tail != wholeTail {
			t.Errorf("chunks %q give %q + %q, the whole text gives %q + %q", chunks, sentences, tail, whole, wholeTail)
		}
	})
}

// split cuts text into len(sizes)+1 chunks of sizes[i]%8 bytes (the last
// takes the rest), without regard for rune boundaries.
func split(text string, sizes []byte) []string {
	var out []string
	for _, n := range sizes {
		k := min(int(n%8), len(text))
		out = append(out, text[:k])
		text = text[k:]
	}
	return append(out, text)
}
