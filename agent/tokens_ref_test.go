package agent

import (
	"strconv"
	"sync"
	"testing"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// The reference counts: tiktoken-go, from the same embedded vocabularies.

var (
	refTiktokenMu sync.Mutex
	refTiktokens  = map[string]*tiktoken.Tiktoken{}
)

// refTiktoken returns tiktoken-go's encoding called name, built once per
// test binary from the offline vocabularies (tiktoken-go would otherwise
// fetch them).
func refTiktoken(t testing.TB, name string) *tiktoken.Tiktoken {
	t.Helper()
	refTiktokenMu.Lock()
	defer refTiktokenMu.Unlock()
	if tk, ok := refTiktokens[name]; ok {
		return tk
	}
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	tk, err := tiktoken.GetEncoding(name)
	if err != nil {
		t.Fatalf("tiktoken-go %s: %v", name, err)
	}
	refTiktokens[name] = tk
	return tk
}

// BenchmarkCountTiktokenGo counts the texts of BenchmarkCount and
// BenchmarkCountShort with tiktoken-go, as koe did before package bpe
// (less its count cache), for comparison.
func BenchmarkCountTiktokenGo(b *testing.B) {
	ref := refTiktoken(b, EncodingO200k)
	for name, text := range map[string]string{"short": tokenBenchLine, "long": tokenBenchText} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ref.EncodeOrdinary(text + strconv.Itoa(i))
			}
		})
	}
}
