package textindex

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var markup = regexp.MustCompile(`(?s)<script.*?</script>|<style.*?</style>|<[^>]*>|&[a-z]+;`)

// proseChunks is real English prose (the knowledge package's sample
// manuals and story) with the markup stripped, cut into chunks of about
// 190 words: the size of what the knowledge index stores.
func proseChunks(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob("../knowledge/testdata/manual/*.html")
	if err != nil {
		tb.Fatal(err)
	}
	files = append(files, "../knowledge/testdata/story.md", "../knowledge/testdata/handbook.ms", "../knowledge/testdata/rules.html")
	slices.Sort(files)
	var words []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		words = append(words, strings.Fields(markup.ReplaceAllString(string(b), " "))...)
	}
	if len(words) < 10_000 {
		tb.Fatalf("only %d words of sample prose", len(words))
	}
	var chunks []string
	for len(words) > 0 {
		n := min(len(words), 190)
		chunks = append(chunks, strings.Join(words[:n], " "))
		words = words[n:]
	}
	return chunks
}
