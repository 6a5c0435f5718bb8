package bpe

import (
	"math/rand/v2"
	"strings"
)

// trickyAlphabet holds what the split patterns tell apart: every letter
// case (Lu, Ll, Lt, Lm, Lo), marks (Mn, Mc, Me), numbers (Nd, Nl, No),
// contractions in both cases, spaces that are and are not ASCII, line
// ends, slashes, symbols, emoji sequences, and bytes that are not UTF-8.
var trickyAlphabet = []string{
	"a", "z", "B", "Q", "é", "É", "ß", "Ω", "ω", "ж", "Ж", "ǅ", "ʰ", "ー", "中", "文", "あ", "カ", "한", "ก", "ि", "ी",
	"e\u0301", "\u0301", "\u20dd", "\u0903", "\ufe0f", "\u200d",
	"0", "7", "42", "123456", "٣", "Ⅻ", "½", "²",
	"'", "'s", "'S", "'t", "'re", "'RE", "'Ve", "'m", "'ll", "'LL", "'d", "'x", "’s",
	" ", " ", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f",
	".", ",", "!", "?", "\"", "/", "//", "-", "(", ")", "{", "}", "<|endoftext|>", "，", "。", "“", "、", "$", "_",
	"🍕", "🎉", "👨‍👩‍👧", "🇯🇵", "\ufffd",
	"\xff", "\x80", "\xed\xa0\x80", "\xe4\xb8", "\xc3",
}

// randomText joins n random parts of trickyAlphabet.
func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(trickyAlphabet[rng.IntN(len(trickyAlphabet))])
	}
	return b.String()
}
