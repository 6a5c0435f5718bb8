package bpe

import (
	"strings"
	"testing"
	"testing/fstest"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Every token of every vocabulary has in the table the rank tiktoken-go's
// loader gives it, and the table holds nothing else.
func TestTableMatchesLoaderRanks(t *testing.T) {
	loader := tiktoken_loader.NewOfflineLoader()
	for _, name := range refNames {
		ranks, err := loader.LoadTiktokenBpe(name + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		table := testEncoding(t, name).Table()
		if table.Len() != len(ranks) {
			t.Errorf("%s: %d tokens in the table, %d in the loader's map", name, table.Len(), len(ranks))
		}
		for token, rank := range ranks {
			if got := table.Rank(token); got != uint32(rank) {
				t.Fatalf("%s: Rank(%q) = %d, want %d", name, token, got, rank)
			}
			if got := table.Token(uint32(rank)); got != token {
				t.Fatalf("%s: Token(%d) = %q, want %q", name, rank, got, token)
			}
		}
		for _, s := range []string{"", "\x00\x01\x02\x03\x04", "<|endoftext|>", strings.Repeat("zq", 40)} {
			if got := table.Rank(s); got != noRank {
				t.Errorf("%s: Rank(%q) = %d, want none", name, s, got)
			}
		}
	}
	if e := testEncoding(t, "p50k_base"); e.Table().Token(50256) != "" {
		t.Errorf("p50k_base has a token at 50256, the rank it skips")
	}
}

func TestLoadEveryEncoding(t *testing.T) {
	for name := range encodings {
		if !Known(name) {
			t.Errorf("Known(%q) = false", name)
		}
		e := testEncoding(t, name)
		if e.Name() != name || e.Count("hello world") != 2 {
			t.Errorf("%s: name %q, counts %d for hello world", name, e.Name(), e.Count("hello world"))
		}
	}
	if _, err := Load("gpt2"); err == nil || Known("gpt2") {
		t.Error("Load(gpt2) succeeded: tiktoken-go-loader has no such file")
	}
}

// A ranks file that is not what tiktoken writes is refused, saying where.
func TestReadTableRefusesBadFiles(t *testing.T) {
	for name, c := range map[string]struct{ file, want string }{
		"empty":        {"", "holds no token"},
		"no rank":      {"YQ==\n", "line 1: no rank"},
		"bad rank":     {"YQ== x\n", `line 1: rank "x" is not a number`},
		"bad base64":   {"YQ== 0\n!!!! 1\n", "line 2: illegal base64"},
		"out of order": {"YQ== 1\nYg== 0\n", "rank 0 out of order"},
		"repeated":     {"YQ== 0\nYQ== 1\n", "rank 1 repeats the bytes of rank 0"},
		"no bytes":     {" 0\n", "rank 0 has no bytes"},
	} {
		_, err := ReadTable(fstest.MapFS{"x.tiktoken": {Data: []byte(c.file)}}, "x.tiktoken")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
	}
	if _, err := ReadTable(fstest.MapFS{}, "missing.tiktoken"); err == nil {
		t.Error("a missing file gave no error")
	}
	// Gaps in the ranks are allowed (p50k_base has one) and stay empty.
	table, err := ReadTable(fstest.MapFS{"x.tiktoken": {Data: []byte("YQ== 0\nYg== 2\n\n")}}, "x.tiktoken")
	if err != nil {
		t.Fatal(err)
	}
	if table.Rank("a") != 0 || table.Rank("b") != 2 || table.Token(1) != "" || table.Len() != 2 {
		t.Errorf("gap: a=%d b=%d token 1=%q len %d", table.Rank("a"), table.Rank("b"), table.Token(1), table.Len())
	}
}
