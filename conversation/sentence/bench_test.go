package sentence

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// reply is a realistic answer of about 4 KB: a think block, then English,
// Chinese and Japanese with markdown, emotions, emoji, a URL and a code
// fence.
var reply = func() string {
	s := `<think>
The user asks about travel plans in Japan and China. I should give a friendly answer with a short list.
Maybe mention the weather, e.g. the rainy season, and a few phrases in Chinese and Japanese.
</think>

[joy] Oh, what a lovely question! 😊 I'd be happy to help you plan your trip.

## Before you go
Here are a few things to keep in mind:
1. **Check the season.** The rainy season in Japan usually starts in early June and lasts about 6.5 weeks.
2. Book trains early, e.g. the Shinkansen from Tokyo to Kyoto, especially around Golden Week.
3. Carry some cash — many small shops still don't take cards (though that's changing fast).
- Get a Suica card for local trains.
- Download offline maps at https://maps.example.com/japan before you leave.

Dr. Tanaka, a friend of mine, always says: "Plan less, wander more." I think she's right! [surprise] Did you know that Kyoto has more than 1,600 temples?

如果你去中国，可以先学几句简单的中文。比如“你好”、“谢谢”和“多少钱？”这些都很有用！北京和上海的地铁都很方便，而且很便宜。[joy]

日本では、電車がとても正確です。駅員さんに「すみません、京都行きはどのホームですか？」と聞けば、きっと親切に教えてくれますよ。お寺を訪れるときは、静かにしましょうね。

Here's a tiny script to convert yen to dollars:
` + "```python\nrate = 0.0067\nprint(round(10000 * rate, 2))\n```" + `

*smiles warmly* Anyway, I hope this helps... Let me know if you want more details! 🌸✨
`
	var b strings.Builder
	for b.Len() < 4000 {
		b.WriteString(s)
	}
	return b.String()[:4000]
}()

// deltas cuts text into tokens of 3 to 6 bytes, like an LLM stream (the
// cuts fall inside runes at times, which the splitter must handle anyway).
func deltas(text string) []string {
	var out []string
	for i := 0; len(text) > 0; i++ {
		n := min(len(text), 3+(i*7)%4)
		out, text = append(out, text[:n]), text[n:]
	}
	return out
}

func benchmark(b *testing.B, text string, opts Options) {
	tokens := deltas(text)
	s := New(opts)
	var dst []Piece
	run := func() {
		for _, d := range tokens {
			dst = s.Push(dst[:0], d)
		}
		dst = s.Flush(dst[:0])
	}
	run()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	allocs := float64(after.Mallocs-before.Mallocs) / float64(b.N)
	b.ReportMetric(allocs/float64(len(tokens)), "allocs/token")
}

func BenchmarkSplitter(b *testing.B) {
	benchmark(b, reply, Options{FasterFirstResponse: true, Emotions: []string{"joy", "surprise", "sadness"}})
}

// BenchmarkNoMarks is the worst case: a 1 MB reply with no sentence end,
// which must stay linear.
func BenchmarkNoMarks(b *testing.B) {
	benchmark(b, strings.Repeat("lorem ipsum dolor sit amet ", 40000), Options{})
}

// BenchmarkSpaces is a 100k run of spaces after a sentence end.
func BenchmarkSpaces(b *testing.B) {
	benchmark(b, "Hello."+strings.Repeat(" ", 100000)+"Bye", Options{})
}

// BenchmarkLongNoMark pushes 2 MB without a sentence end in deltas of 1–4
// bytes, as a fast token stream that never finishes a sentence would:
// words, one endless word, and Chinese without spaces. Each size is timed,
// so ns/byte shows whether the cost stays linear as the input grows.
func BenchmarkLongNoMark(b *testing.B) {
	texts := map[string]string{
		"words": "lorem ipsum dolor sit amet consectetur adipiscing elit ",
		"word":  "abcdefghijklmnopqrstuvwxyz0123456789",
		"cjk":   "我们今天在这里讨论一个没有句号的很长的回答",
	}
	for _, kind := range []string{"words", "word", "cjk"} {
		for _, size := range []int{512 << 10, 2 << 20} {
			for _, maxRunes := range []int{0, 400} {
				text := strings.Repeat(texts[kind], size/len(texts[kind])+1)[:size]
				text = strings.ToValidUTF8(text, "")
				var tokens []string
				for i, rest := 0, text; len(rest) > 0; i++ {
					n := min(len(rest), 1+(i*7)%4)
					tokens, rest = append(tokens, rest[:n]), rest[n:]
				}
				name := fmt.Sprintf("%s/%dKB/max=%d", kind, size>>10, maxRunes)
				b.Run(name, func(b *testing.B) {
					s := New(Options{MaxPieceRunes: maxRunes})
					var dst []Piece
					b.ReportAllocs()
					for b.Loop() {
						for _, tok := range tokens {
							dst = s.Push(dst[:0], tok)
						}
						dst = s.Flush(dst[:0])
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(text)), "ns/byte")
				})
			}
		}
	}
}
