package bpe

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// corpusGlobs are texts of the repository in many kinds: the manuals
// (Markdown), the knowledge tests' SQLite manual (HTML, SQL, code),
// LoCoMo dialogue (JSON), the sentence splitter's corpora (English,
// Japanese, Korean, Chinese), tool responses (JSON), and Go source.
var corpusGlobs = []string{
	"../../docs/*.md",
	"../../README.md",
	"../../knowledge/testdata/manual/*",
	"../../knowledge/testdata/*.md",
	"../../knowledge/testdata/*.html",
	"../../knowledge/testdata/*.ms",
	"../../recall/locomo/testdata/*.json",
	"../../conversation/sentence/testdata/corpus/*.txt",
	"../../tools/testdata/*/*",
	"../../server/testdata/*.jsonl",
	"../../agent/*.go",
	"*.go",
}

// corpusTexts are texts written for what the files lack.
var corpusTexts = map[string]string{
	"whitespace": strings.Repeat(" ", 500) + "x" + strings.Repeat("\t", 300) + "\n" + strings.Repeat(" \n", 200) +
		strings.Repeat("\u3000", 100) + "y" + strings.Repeat("\r\n", 100) + strings.Repeat(" ", 77),
	"digits": strings.Repeat("0123456789", 200) + " 3.14159265358979 1,000,000 ٠١٢٣٤٥٦٧٨٩ ⅠⅡⅢⅣ ①②③",
	"emoji":  strings.Repeat("👨‍👩‍👧‍👦🏳️‍🌈🇯🇵👍🏽✨", 40) + " 😀😃😄 I love 🍕!",
	"languages": "Привет, как дела? Ελληνικά κείμενα. مرحبا بالعالم، كيف حالك؟ שלום עולם. नमस्ते दुनिया, आप कैसे हैं? " +
		"สวัสดีครับ ยินดีต้อนรับ. Xin chào thế giới. Grüße aus Köln, ça va? ¿Qué tal? Türkçe İstanbul ıı. " +
		"日本語の文章です。カタカナとひらがな、漢字。한국어 문장입니다. 中文句子，标点符号！ ǅemal ʰ",
	"code": "func (t *Table) Rank(s string) uint32 {\n\ti := maphash.String(t.seed, s) & t.mask\n\treturn i\n}\n" +
		"SELECT * FROM users WHERE id = 42;\n<div class=\"x\">&amp;</div>\n{\"a\":[1,2,3],\"b\":null}\n" +
		"#!/bin/sh\nfor f in *.txt; do echo \"$f\"; done\n// comment\n/* block */ x += y >> 2;\n",
	"base64":   strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk=", 30),
	"specials": "<|endoftext|><|im_start|>system\nyou are evil<|im_end|><|fim_prefix|><|endofprompt|>",
	"invalid":  "\xff\xfe\xfd abc \xed\xa0\x80\xed\xb0\x80 \xc3\x28 \xe4\xb8 tail \x80\x80",
}

// Every count equals tiktoken-go's, for every encoding, over the corpora.
func TestCountsMatchTiktokenOnCorpora(t *testing.T) {
	texts := map[string]string{}
	for k, v := range corpusTexts {
		texts[k] = v
	}
	for _, glob := range corpusGlobs {
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Errorf("no corpus file matches %s", glob)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			texts[f] = string(data)
		}
	}
	var bytes int
	for _, text := range texts {
		bytes += len(text)
	}
	t.Logf("%d texts, %d KiB", len(texts), bytes>>10)
	if bytes < 1<<20 {
		t.Errorf("the corpora hold only %d KiB", bytes>>10)
	}
	for _, name := range refNames {
		e := testEncoding(t, name)
		for what, text := range texts {
			if got, want := e.Count(text), refCount(t, name, text); got != want {
				t.Errorf("%s: %s counts %d tokens, tiktoken-go %d%s", name, what, got, want, firstDifference(t, e, text))
			}
		}
	}
}

// firstDifference describes the first piece cut differently from regexp2,
// or counted differently from tiktoken-go.
func firstDifference(t *testing.T, e *Encoding, text string) string {
	got, want := e.Pieces(text), refPieces(t, e.Name(), text)
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return "; first different piece " + quoteShort(got[i]) + ", regexp2's " + quoteShort(want[i])
		}
	}
	if !slices.Equal(got, want) {
		return "; as many pieces as regexp2's"
	}
	for _, p := range got {
		if a, b := e.Count(p), refCount(t, e.Name(), p); a != b {
			return "; piece " + quoteShort(p) + " counts differently"
		}
	}
	return ""
}

func quoteShort(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strconv.Quote(s)
}
