package sentence

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

var emotions = []string{"joy", "Sad"}

var (
	plain  = Options{Emotions: emotions}
	faster = Options{FasterFirstResponse: true, Emotions: emotions}
)

// say, silent and think build expected pieces.
func say(display, speech string, emotions ...string) Piece {
	if len(emotions) == 0 {
		emotions = nil
	}
	return Piece{Display: display, Speech: speech, Emotions: emotions}
}

func silent(display string, emotions ...string) Piece { return say(display, "", emotions...) }

func think(display string) Piece { return Piece{Display: display, Think: true} }

var cases = []struct {
	name string
	opts Options
	in   string
	want []Piece
}{
	{"empty", plain, "", nil},
	{"whitespace only", plain, " \n\t \n", []Piece{silent(" \n\t \n")}},
	{"sentences", plain, "Hello. How are you? I'm fine!", []Piece{
		say("Hello. ", "Hello."), say("How are you? ", "How are you?"), say("I'm fine!", "I'm fine!"),
	}},
	{"spaces after an end stay with it", plain, "One.   \n\n  Two.", []Piece{
		say("One.   \n\n  ", "One."), say("Two.", "Two."),
	}},
	{"abbreviations", plain, "Mr. Smith and Mrs. Jones met Dr. Who (Prof. X) vs. Ms. Y at 5 p.m. today. Then e.g. tea, i.e. Earl Grey etc. were served. Jr. and Sr. on St. Mark's day, in the U.S. too. No. 5 won. I said no. Fine", []Piece{
		say("Mr. Smith and Mrs. Jones met Dr. Who (Prof. X) vs. Ms. Y at 5 p.m. today. ", "Mr. Smith and Mrs. Jones met Dr. Who vs. Ms. Y at 5 p.m. today."),
		say("Then e.g. tea, i.e. Earl Grey etc. were served. ", "Then e.g. tea, i.e. Earl Grey etc. were served."),
		say("Jr. and Sr. on St. Mark's day, in the U.S. too. ", "Jr. and Sr. on St. Mark's day, in the U.S. too."),
		say("No. 5 won. ", "No. 5 won."),
		say("I said no. ", "I said no."),
		say("Fine", "Fine"),
	}},
	{"abbreviation after a parenthesis", plain, "See (Dr. Who) and (Mr. Xu. He left.) Now.", []Piece{
		say("See (Dr. Who) and (Mr. Xu. ", "See and"),
		say("He left.) Now.", "Now."), // a silent sentence joins the next
	}},
	{"initials", plain, "J. K. Rowling wrote it. So did I. Then", []Piece{
		say("J. K. Rowling wrote it. ", "J. K. Rowling wrote it."),
		say("So did I. ", "So did I."),
		say("Then", "Then"),
	}},
	{"decimals and versions", plain, "Pi is 3.14 and Go v1.2.3 is out. It costs 5. Yes", []Piece{
		say("Pi is 3.14 and Go v1.2.3 is out. ", "Pi is 3.14 and Go v1.2.3 is out."),
		say("It costs 5. ", "It costs 5."),
		say("Yes", "Yes"),
	}},
	{"numbered list at line start", plain, "Steps:\n1. Open it.\n2. Close it\n  10. Indented\n12) Last one\n", []Piece{
		say("Steps:\n", "Steps:"),
		say("1. Open it.\n", "1. Open it."),
		say("2. Close it\n  ", "2. Close it"),
		say("10. Indented\n", "10. Indented"),
		say("12) Last one\n", "12 Last one"),
	}},
	{"URL and e-mail mid-sentence", plain, "Visit https://example.com/a.b?x=1 or www.example.org/x.y for docs. Mail me@example.com now. Ok", []Piece{
		say("Visit https://example.com/a.b?x=1 or www.example.org/x.y for docs. ", "Visit or for docs."),
		say("Mail me@example.com now. ", "Mail me@example.com now."),
		say("Ok", "Ok"),
	}},
	{"URL and e-mail at sentence end", plain, "See https://go.dev/doc. Or example.com. Write to a@b.org. Also e.g. example.com/x.y works. Done", []Piece{
		say("See https://go.dev/doc. ", "See."),
		say("Or example.com. ", "Or example.com."),
		say("Write to a@b.org. ", "Write to a@b.org."),
		say("Also e.g. example.com/x.y works. ", "Also e.g. example.com/x.y works."),
		say("Done", "Done"),
	}},
	{"quotes after end marks", plain, "He said \"Stop.\" Then (he left.) And 'why?' Ok.", []Piece{
		say("He said \"Stop.\" ", "He said \"Stop.\""),
		say("Then (he left.) ", "Then"),
		say("And 'why?' ", "And 'why?'"),
		say("Ok.", "Ok."),
	}},
	{"Japanese quotes", plain, "「こんにちは。」と言った。『はい！』次です", []Piece{
		say("「こんにちは。」", "「こんにちは。」"),
		say("と言った。", "と言った。"),
		say("『はい！』", "『はい！』"),
		say("次です", "次です"),
	}},
	{"ellipses", plain, "Wait... what? Well… maybe. Hmm……そう", []Piece{
		say("Wait... ", "Wait..."),
		say("what? ", "what?"),
		say("Well… ", "Well…"),
		say("maybe. ", "maybe."),
		say("Hmm……", "Hmm……"),
		say("そう", "そう"),
	}},
	{"mark runs", plain, "Really?! Yes!!! No?!?\n", []Piece{
		say("Really?! ", "Really?!"), say("Yes!!! ", "Yes!!!"), say("No?!?\n", "No?!?"),
	}},
	{"ASCII mark before CJK", plain, "すごい!次は?はい", []Piece{
		say("すごい!", "すごい!"), say("次は?", "次は?"), say("はい", "はい"),
	}},
	{"newline-ended list items", plain, "Fruits\n- apples\n- pears\n\n* plums\n+ figs", []Piece{
		say("Fruits\n", "Fruits"), say("- apples\n", "apples"), say("- pears\n\n", "pears"),
		say("* plums\n", "plums"), say("+ figs", "figs"),
	}},
	{"newline without speech does not cut", plain, "\n\n[joy]\n(aside)\nHi there.", []Piece{
		say("\n\n[joy]\n(aside)\nHi there.", "Hi there.", "joy"),
	}},
	{"code fence", plain, "Run this:\n```go\nfmt.Println(\"a. b\")\nx := 1.5\n```\nThat prints it. Done", []Piece{
		say("Run this:\n", "Run this:"),
		silent("```go\nfmt.Println(\"a. b\")\nx := 1.5\n```\n"),
		say("That prints it. ", "That prints it."),
		say("Done", "Done"),
	}},
	{"list after a code fence", plain, "```\nx\n```\n- one\n", []Piece{
		silent("```\nx\n```\n"), say("- one\n", "one"),
	}},
	{"unclosed code fence", plain, "Code:\n```\nrm -rf x. y\n", []Piece{
		say("Code:\n", "Code:"), silent("```\nrm -rf x. y\n"),
	}},
	{"inline code is spoken", plain, "Use `go test` now. Ok", []Piece{
		say("Use `go test` now. ", "Use go test now."), say("Ok", "Ok"),
	}},
	{"think block", plain, "<think>The user greets me. I should reply.\nBriefly</think>\n\nHello there. Bye", []Piece{
		think("<think>The user greets me. "),
		think("I should reply.\n"),
		think("Briefly</think>\n\n"),
		say("Hello there. ", "Hello there."),
		say("Bye", "Bye"),
	}},
	{"think tag right after a sentence end", plain, "<think>Done.</think>Hi. <think>Again. </think> Ok.", []Piece{
		think("<think>Done.</think>"),
		say("Hi. ", "Hi."),
		think("<think>Again. </think> "),
		say("Ok.", "Ok."),
	}},
	{"think starts the first piece for faster", faster, "<think>Hmm, ok, so.</think>Well, I think so. Yes, sure.", []Piece{
		think("<think>Hmm, ok, so.</think>"),
		say("Well, ", "Well,"),
		say("I think so. ", "I think so."),
		say("Yes, sure.", "Yes, sure."),
	}},
	{"unclosed think", plain, "<think>Still thinking. About it", []Piece{
		think("<think>Still thinking. "), think("About it"),
	}},
	{"not a think tag", plain, "a <thin> b <b>bold</b> c. 3 < 4.", []Piece{
		say("a <thin> b <b>bold</b> c. ", "a b bold c."), say("3 < 4.", "3 4."),
	}},
	{"emotions", plain, "[joy] Great news! [foo] Sadly [SAD][joy] no. [ joy ]", []Piece{
		say("[joy] Great news! ", "Great news!", "joy"),
		say("[foo] Sadly [SAD][joy] no. ", "Sadly no.", "Sad", "joy"),
		silent("[ joy ]", "joy"),
	}},
	{"emoji", plain, "Great job! 🎉👍🏽 Thanks 😀!\nFlags 🇯🇵 and 👨‍👩‍👧 family ❤️ at 25°C.", []Piece{
		say("Great job! 🎉👍🏽 ", "Great job!"),
		say("Thanks 😀!\n", "Thanks!"),
		say("Flags 🇯🇵 and 👨‍👩‍👧 family ❤️ at 25°C.", "Flags and family at 25°C."),
	}},
	{"markdown", plain, "# Title\n## Sub *title*\n**Bold** and _under_ ~~gone~~.\n> quoted\n| a | b |\n---\n+ plus\n-5 degrees", []Piece{
		say("# Title\n", "Title"),
		say("## Sub *title*\n", "Sub"),
		say("**Bold** and _under_ ~~gone~~.\n", "Bold and under gone."),
		say("> quoted\n", "quoted"),
		say("| a | b |\n", "a b"),
		say("---\n+ plus\n", "plus"),
		say("-5 degrees", "-5 degrees"),
	}},
	{"roleplay actions", plain, "*waves* Hi there. *smiles\nwarmly* Ok. 5 * 3 = 15.", []Piece{
		say("*waves* Hi there. ", "Hi there."),
		say("*smiles\nwarmly* Ok. ", "warmly Ok."),
		say("5 * 3 = 15.", "5 3 = 15."),
	}},
	{"parentheses spanning pieces", plain, "I agree (mostly. But not\nalways) with you. Right（笑。）ね。", []Piece{
		say("I agree (mostly. ", "I agree"),
		say("But not\nalways) with you. ", "with you."),
		say("Right（笑。）", "Right"),
		say("ね。", "ね。"),
	}},
	{"faces are not asides", plain, "Oh no :( that is sad :-( but ok (really). Yes :)", []Piece{
		say("Oh no :( that is sad :-( but ok (really). ", "Oh no that is sad but ok."), say("Yes :)", "Yes"),
	}},
	{"faster first response off", plain, "Well, I think so, yes. Sure, ok.", []Piece{
		say("Well, I think so, yes. ", "Well, I think so, yes."), say("Sure, ok.", "Sure, ok."),
	}},
	{"faster first response on", faster, "Well, I think so, yes. Sure, ok.", []Piece{
		say("Well, ", "Well,"), say("I think so, yes. ", "I think so, yes."), say("Sure, ok.", "Sure, ok."),
	}},
	{"faster: 1,000 and a; b", faster, "It costs 1,000 yen; a lot. Ok", []Piece{
		say("It costs 1,000 yen; ", "It costs 1,000 yen;"), say("a lot. ", "a lot."), say("Ok", "Ok"),
	}},
	{"faster Chinese", faster, "好的，我明白了。你呢，怎么样？", []Piece{
		say("好的，", "好的，"), say("我明白了。", "我明白了。"), say("你呢，怎么样？", "你呢，怎么样？"),
	}},
	{"faster Japanese", faster, "はい、分かりました。では、", []Piece{
		say("はい、", "はい、"), say("分かりました。", "分かりました。"), say("では、", "では、"),
	}},
	{"faster skips a silent start", faster, "[joy], well, hi. Ok, go.", []Piece{
		say("[joy], well, ", "well,", "joy"), say("hi. ", "hi."), say("Ok, go.", "Ok, go."),
	}},
	{"first piece max words", Options{FirstPieceMaxWords: 4}, "This is a rather long first sentence without a mark and more. Then this one is not cut at all here.", []Piece{
		say("This is a rather ", "This is a rather"),
		say("long first sentence without a mark and more. ", "long first sentence without a mark and more."),
		say("Then this one is not cut at all here.", "Then this one is not cut at all here."),
	}},
	{"first piece max words CJK", Options{FirstPieceMaxWords: 3}, "今日はとても良い天気ですね。明日も晴れるでしょう", []Piece{
		say("今日はとても", "今日はとても"),
		say("良い天気ですね。", "良い天気ですね。"),
		say("明日も晴れるでしょう", "明日も晴れるでしょう"),
	}},
	{"first piece max words with faster", Options{FasterFirstResponse: true, FirstPieceMaxWords: 3}, "Oh, hi. One two three four five six.", []Piece{
		say("Oh, ", "Oh,"), say("hi. ", "hi."), say("One two three four five six.", "One two three four five six."),
	}},
	{"Korean with spaces", plain, "안녕하세요. 저는 코에입니다! 오늘 어때요? 좋아요", []Piece{
		say("안녕하세요. ", "안녕하세요."), say("저는 코에입니다! ", "저는 코에입니다!"),
		say("오늘 어때요? ", "오늘 어때요?"), say("좋아요", "좋아요"),
	}},
	{"Korean faster", faster, "네, 알겠습니다. 감사합니다.", []Piece{
		say("네, ", "네,"), say("알겠습니다. ", "알겠습니다."), say("감사합니다.", "감사합니다."),
	}},
	{"Chinese", plain, "你好！我是小明。你叫什么名字？“好的。”他说", []Piece{
		say("你好！", "你好！"), say("我是小明。", "我是小明。"), say("你叫什么名字？", "你叫什么名字？"),
		say("“好的。”", "“好的。”"), say("他说", "他说"),
	}},
	{"mixed scripts", plain, "I love 東京. 日本語も話せます。그리고 한국어도요! Done 😀", []Piece{
		say("I love 東京. ", "I love 東京."), say("日本語も話せます。", "日本語も話せます。"),
		say("그리고 한국어도요! ", "그리고 한국어도요!"), say("Done 😀", "Done"),
	}},
	{"partial think tag at the end", plain, "Hi <thi", []Piece{say("Hi <thi", "Hi")}},
	{"invalid UTF-8", plain, "ab\xff. c\xe4\xbd", []Piece{
		say("ab\xff. ", "ab."), say("c\xe4\xbd", "c"),
	}},
}

// chunkings feeds a text whole, rune by rune and byte by byte.
var chunkings = []struct {
	name string
	cut  func(string) []string
}{
	{"whole", func(s string) []string { return []string{s} }},
	{"runes", func(s string) []string {
		var out []string
		for len(s) > 0 {
			_, n := utf8.DecodeRuneInString(s)
			out, s = append(out, s[:n]), s[n:]
		}
		return out
	}},
	{"bytes", func(s string) []string {
		out := make([]string, len(s))
		for i := range len(s) {
			out[i] = s[i : i+1]
		}
		return out
	}},
}

func split(s *Splitter, deltas []string) []Piece {
	var out []Piece
	for _, d := range deltas {
		out = s.Push(out, d)
	}
	return s.Flush(out)
}

func TestSplitter(t *testing.T) {
	for _, c := range cases {
		s := New(c.opts) // reused across chunkings: Flush must reset it
		for _, ch := range chunkings {
			t.Run(c.name+"/"+ch.name, func(t *testing.T) {
				got := split(s, ch.cut(c.in))
				checkPieces(t, c.in, got)
				if !reflect.DeepEqual(got, c.want) {
					t.Errorf("got:\n%s\nwant:\n%s", dump(got), dump(c.want))
				}
			})
		}
	}
}

func dump(ps []Piece) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("\t")
		if p.Think {
			b.WriteString("think ")
		}
		b.WriteString(strconv.Quote(p.Display) + " -> " + strconv.Quote(p.Speech))
		if p.Emotions != nil {
			b.WriteString(" " + strings.Join(p.Emotions, ","))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestSplitTags(t *testing.T) {
	s := New(plain)
	var got []Piece
	for _, d := range []string{"<th", "ink>Hmm", ". Ok", ".</thi", "nk>\n[jo", "y] Hel", "lo! 你好", "。"} {
		got = s.Push(got, d)
	}
	got = s.Flush(got)
	want := []Piece{
		think("<think>Hmm. "),
		think("Ok.</think>\n"),
		say("[joy] Hello! ", "Hello!", "joy"),
		say("你好。", "你好。"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", dump(got), dump(want))
	}
}

// TestPiecesArriveEarly checks that a piece is handed out as soon as the
// rune after it decides it, not at Flush.
func TestPiecesArriveEarly(t *testing.T) {
	s := New(faster)
	steps := []struct {
		delta string
		want  []string
	}{
		{"Well", nil},
		{",", nil},
		{" I", []string{"Well, "}},
		{" see.", nil},
		{" ", nil}, // the space may be followed by more space
		{"你好。", []string{"I see. "}},
		{"「", []string{"你好。"}},
		{"はい。", nil},
		{"」", nil}, // a closer may still follow
		{"x", []string{"「はい。」"}},
	}
	for _, st := range steps {
		var got []string
		for _, p := range s.Push(nil, st.delta) {
			got = append(got, p.Display)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Fatalf("after %q: got %q, want %q", st.delta, got, st.want)
		}
	}
	if got := s.Flush(nil); len(got) != 1 || got[0].Display != "x" {
		t.Fatalf("flush: %#v", got)
	}
}

func TestResetAndReuse(t *testing.T) {
	s := New(faster)
	got := s.Push(nil, "Hi, there (unclosed [jo")
	if len(got) != 1 || got[0].Display != "Hi, " {
		t.Fatalf("got %#v", got)
	}
	s.Reset() // interrupted: the rest is dropped, the next reply starts fresh
	got = s.Flush(s.Push(nil, "Yes, [joy] sure."))
	want := []Piece{say("Yes, ", "Yes,"), say("[joy] sure.", "sure.", "joy")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", dump(got), dump(want))
	}
}

func TestLongCodeFence(t *testing.T) {
	line := "fmt.Println(i) // print it. Next\n"
	in := "Code:\n```go\n" + strings.Repeat(line, 40) + "```\nDone."
	got := split(New(plain), chunkings[1].cut(in))
	checkPieces(t, in, got)
	if !reflect.DeepEqual(got[0], say("Code:\n", "Code:")) || !reflect.DeepEqual(got[len(got)-1], say("Done.", "Done.")) {
		t.Fatalf("ends: %s", dump(got))
	}
	fence := got[1 : len(got)-1]
	if len(fence) < 2 {
		t.Fatalf("a long fence should come in several pieces: %s", dump(got))
	}
	for _, p := range fence {
		if p.Speech != "" || p.Think || !strings.HasSuffix(p.Display, "\n") || len(p.Display) > fenceCutBytes+len(line) {
			t.Errorf("fence piece %q", p.Display)
		}
	}
}

func TestManyURLsInOneWord(t *testing.T) {
	in := "See " + strings.Repeat("http://a.b/c中", 20000) + " ok."
	got := split(New(plain), []string{in})
	checkPieces(t, in, got)
	want := "See " + strings.Repeat("中", 20000) + " ok."
	if len(got) != 1 || got[0].Speech != want {
		t.Fatalf("speech %.40q…", got[0].Speech)
	}
}

func TestIsSpaceMatchesUnicode(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if isSpace(r) != unicode.IsSpace(r) {
			t.Fatalf("isSpace(%U) = %v", r, isSpace(r))
		}
	}
}
