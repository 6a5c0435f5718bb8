package textindex

import (
	"math"
	"slices"
	"testing"
)

// relatedDocs are three documents: one in the reader's word ("sizes"),
// one in the manual's ("bytes"), one unrelated.
func relatedDocs(p Params) *Index {
	ix := New(p)
	addAll(ix,
		Terms("the sizes of an integer column"),
		Terms("an integer is stored in up to eight bytes"),
		Terms("dates are stored as text"),
		Terms("a column has a type"),
	)
	return ix
}

func TestRelatedOffByDefault(t *testing.T) {
	got := ranking(relatedDocs(Params{}), Terms("sizes"))
	if len(got) != 1 || got[0] != 0 {
		t.Errorf("without Related, %q found %v, want only doc 0", "sizes", got)
	}
}

// TestRelatedWidensQuery: with Related, a question in the reader's word
// finds the passage in the manual's, ranked under the one that uses the
// reader's own word, and scored at Related times what the word itself
// would give it.
func TestRelatedWidensQuery(t *testing.T) {
	ix := relatedDocs(Params{Related: 0.5})
	got := ranking(ix, Terms("sizes"))
	if len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("with Related, %q ranked %v, want [0 1]: the reader's word first, then the manual's", "sizes", got)
	}
	widened := scores(t, ix, Terms("sizes"))[1]
	direct := scores(t, ix, Terms("bytes"))[1]
	if math.Abs(widened-0.5*direct) > 1e-12 {
		t.Errorf("doc 1 scored %g through the related term, want half of %g", widened, direct)
	}
	// A query naming both words counts "bytes" once, at its own weight.
	both := scores(t, ix, Terms("sizes bytes"))[1]
	if math.Abs(both-direct) > 1e-12 {
		t.Errorf("%q scored doc 1 %g, want %g: a query word is not widened onto itself", "sizes bytes", both, direct)
	}
}

// TestIrregularFormsAtFullWeight: "wrote" is the same word as "write",
// which the stemmer does not see.
func TestIrregularFormsAtFullWeight(t *testing.T) {
	ix := New(Params{Related: 0.3})
	addAll(ix, Terms("who wrote the manual"), Terms("how to write a page"), Terms("nothing here"))
	s := scores(t, ix, Terms("write"))
	if len(s) != 2 {
		t.Fatalf("%q found %v, want docs 0 and 1", "write", s)
	}
	// Both terms occur once in documents of the same length with the same
	// document frequency: the same score.
	if math.Abs(s[0]-s[1]) > 1e-12 {
		t.Errorf("%q scored %g for \"wrote\" and %g for \"write\": an irregular form weighs as the word", "write", s[0], s[1])
	}
}

func TestRelatedClamped(t *testing.T) {
	for _, c := range []struct {
		in, want float64
	}{{-1, 0}, {math.NaN(), 0}, {0.25, 0.25}, {3, 1}} {
		if got := New(Params{Related: c.in}).related; got != c.want && !(math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("Params{Related: %g} gives %g, want %g", c.in, got, c.want)
		}
	}
}

// TestRelatedTableAnalysed: the table holds words as Terms gives them
// (stemmed: "sizes" meets "bytes"), a term is never related to itself, and
// relations go both ways, so a query in either word meets the other.
func TestRelatedTableAnalysed(t *testing.T) {
	size, bytes := Terms("sizes")[0], Terms("bytes")[0]
	if !hasRelated(related[size], bytes) {
		t.Errorf("%q (from %q) does not widen to %q (from %q)", size, "sizes", bytes, "bytes")
	}
	for term, rs := range related {
		for _, r := range rs {
			if r.term == term {
				t.Errorf("%q is related to itself", term)
			}
			if !hasRelated(related[r.term], term) {
				t.Errorf("%q widens to %q but not back", term, r.term)
			}
		}
	}
}

// TestRelatedExported: Related gives what Score widens a term with, and
// nothing for a term the table does not know.
func TestRelatedExported(t *testing.T) {
	got := Related(Terms("sizes")[0])
	if !slices.Contains(got, Terms("bytes")[0]) {
		t.Errorf("Related(%q) = %q, want it to hold %q", Terms("sizes")[0], got, Terms("bytes")[0])
	}
	if got := Related("zzyzx"); len(got) != 0 {
		t.Errorf("Related of an unknown term = %q, want nothing", got)
	}
}
