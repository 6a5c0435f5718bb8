package bpe

import "unicode/utf8"

// A splitter returns the end of the piece that starts at s[i] (i < len(s)),
// exactly where the encoding's pre-tokenizer regular expression, run by
// regexp2 (a backtracking engine: the first alternative that matches
// wins, quantifiers are greedy and give back only when what follows
// fails), ends its match there. Every character starts a match of each
// pattern (every character is a space, a letter, a number, a mark or
// else punctuation, and each has an alternative), so the pieces tile the
// text. s is valid UTF-8.
//
// The patterns are written above each function; the comments inside
// follow their alternatives in order. Hand-written rather than compiled
// because regexp2 costs a matcher setup and a []rune copy of the text per
// call, Go's regexp has no lookahead, and these seven patterns are all there is.
type splitter func(s string, i int) int

// splitO200k follows o200k_base's pattern:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n/]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
func splitO200k(s string, i int) int {
	c, n := classOf(s, i)
	prefixed := c&notPrefix == 0
	// The optional prefix is tried taken first, then left out.
	if prefixed {
		if e := o200kLowerEnd(s, i+n); e >= 0 {
			return e
		}
	}
	if e := o200kLowerEnd(s, i); e >= 0 {
		return e
	}
	if prefixed {
		if e := o200kUpperEnd(s, i+n); e >= 0 {
			return e
		}
	}
	if e := o200kUpperEnd(s, i); e >= 0 {
		return e
	}
	return numbersOrElse(s, i, c, "\r\n/")
}

// o200kLowerEnd matches [upper]*[lower]+(contraction)? from i: the end, or
// -1. The greedy [upper]* gives back one character at a time until
// [lower]+ matches at least one.
func o200kLowerEnd(s string, i int) int {
	upperEnd, _ := run(s, i, cUpper)
	for j := upperEnd; ; {
		if e, k := run(s, j, cLower); k > 0 {
			return contraction(s, e, true)
		}
		if j == i {
			return -1
		}
		_, n := utf8.DecodeLastRuneInString(s[i:j])
		j -= n
	}
}

// o200kUpperEnd matches [upper]+[lower]*(contraction)? from i: the end, or
// -1. [lower]* can match nothing, so nothing is given back.
func o200kUpperEnd(s string, i int) int {
	e, k := run(s, i, cUpper)
	if k == 0 {
		return -1
	}
	e, _ = run(s, e, cLower)
	return contraction(s, e, true)
}

// splitCL100k follows cl100k_base's pattern:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)
//	|[^\r\n\p{L}\p{N}]?\p{L}+
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
func splitCL100k(s string, i int) int {
	if e := contraction(s, i, true); e > i {
		return e
	}
	c, n := classOf(s, i)
	if c&notPrefix == 0 {
		if e, k := run(s, i+n, cLetter); k > 0 {
			return e
		}
	}
	if c&cLetter != 0 {
		e, _ := run(s, i, cLetter)
		return e
	}
	return numbersOrElse(s, i, c, "\r\n")
}

// numbersOrElse matches the alternatives o200k_base and cl100k_base end
// with, \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[tail]*|\s*[\r\n]+|\s+(?!\S)|\s+, at
// i, where s[i] is of class c.
func numbersOrElse(s string, i int, c class, tail string) int {
	if c&cNumber != 0 {
		return numbers(s, i, 3)
	}
	if e := punctuation(s, i, tail); e >= 0 {
		return e
	}
	return spaces(s, i)
}

// splitGPT2 follows the pattern of p50k_base and r50k_base (GPT-2's):
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(s string, i int) int {
	if e := contraction(s, i, false); e > i {
		return e
	}
	j := i
	if s[i] == ' ' {
		j++
	}
	// " ?" gives its space back only to be followed by the same class,
	// which a space is not: so each alternative is decided at j.
	c, _ := classOf(s, j)
	switch {
	case c&cLetter != 0:
		e, _ := run(s, j, cLetter)
		return e
	case c&cNumber != 0:
		e, _ := run(s, j, cNumber)
		return e
	case j < len(s) && c&notOther == 0:
		return otherRun(s, j, notOther)
	}
	return spacesNoNewline(s, i)
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i, ignoring case if fold:
// its end, or i. regexp2 ignores case by lowering the text's character,
// and only ASCII letters lower to these.
func contraction(s string, i int, fold bool) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	lower := func(b byte) byte {
		if fold && 'A' <= b && b <= 'Z' {
			return b + 'a' - 'A'
		}
		return b
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return i + 3
		}
	}
	return i
}

// numbers matches \p{N}{1,max} at i, where s[i] is a number.
func numbers(s string, i, max int) int {
	for k := 0; k < max; k++ {
		c, n := classOf(s, i)
		if n == 0 || c&cNumber == 0 {
			break
		}
		i += n
	}
	return i
}

// punctuation matches " ?[^\s\p{L}\p{N}]+[tail]*" at i: the end, or -1.
// The space is given back only to be part of [^\s…]+, which it cannot.
func punctuation(s string, i int, tail string) int {
	j := i
	if s[i] == ' ' {
		j++
	}
	e := otherRun(s, j, notOther)
	if e == j {
		return -1
	}
	for e < len(s) && containsByte(tail, s[e]) {
		e++
	}
	return e
}

func containsByte(set string, b byte) bool {
	for k := range len(set) {
		if set[k] == b {
			return true
		}
	}
	return false
}

// spaces matches \s*[\r\n]+|\s+(?!\S)|\s+ at i, where s[i] is a space
// (the patterns' last three alternatives).
func spaces(s string, i int) int {
	// \s*[\r\n]+: the greedy \s* gives back until [\r\n]+ matches, which
	// is at the run's last newline, and [\r\n]+ then ends after it.
	// (No byte of a longer UTF-8 character is a \r or \n.)
	end, _ := run(s, i, cSpace)
	for j := end; j > i; j-- {
		if s[j-1] == '\r' || s[j-1] == '\n' {
			return j
		}
	}
	return spacesNoNewline(s, i)
}

// spacesNoNewline matches \s+(?!\S)|\s+ at i, where s[i] is a space: the
// run of spaces, less its last character when that is followed by a
// non-space and is not the first (that character then begins the next piece,
// e.g. " world" after the other spaces).
func spacesNoNewline(s string, i int) int {
	end, count := run(s, i, cSpace)
	if end == len(s) || count < 2 {
		return end
	}
	_, n := utf8.DecodeLastRuneInString(s[i:end])
	return end - n
}
