package knowledge

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"koe/llm"
	"koe/testkit/fakellm"
	"koe/testkit/fakellm/fakellmtest"
	"koe/textindex"
)

// Embedding models for the hybrid tests, each served by a fake
// OpenAI-compatible endpoint over real HTTP, so the vectors travel the
// way a model's do.

// hybridDim is the length of the test models' vectors.
const hybridDim = 128

// serveEmbeddings starts an endpoint that answers every text with
// vector(text), and an embedder that talks to it.
func serveEmbeddings(t testing.TB, vector func(text string) []float32) Embedder {
	t.Helper()
	srv := fakellmtest.Start(t)
	srv.SetEmbeddings(func(req fakellm.EmbeddingRequest) fakellm.EmbeddingReply {
		out := make([][]float32, len(req.Input))
		for i, text := range req.Input {
			out[i] = vector(text)
		}
		return fakellm.EmbeddingReply{Vectors: out}
	})
	return llm.NewEmbedder(llm.EmbeddingsConfig{BaseURL: srv.URL(), Model: "embed", Timeout: 30 * time.Second, QueryTimeout: 30 * time.Second}, nil)
}

// hashSeed is a text's (or a word's) seed for its random vector.
func hashSeed(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s)) // a hash never fails to write
	return h.Sum64()
}

// randomVector is a vector of Gaussian numbers drawn from seed.
func randomVector(seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	v := make([]float32, hybridDim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// unrelatedVector is a model that knows nothing: every distinct text gets
// its own random vector (a hash of the whole text seeds it), so similar
// texts are no closer than any others.
func unrelatedVector(text string) []float32 { return randomVector(hashSeed(text)) }

// constantVector is a model that answers one vector whatever the text.
func constantVector(string) []float32 {
	v := make([]float32, hybridDim)
	for i := range v {
		v[i] = float32(i%7) + 1
	}
	return v
}

// topicVector is a weak model that knows what a text is about but not
// what it says: every text that names topic gets one vector, every other
// text another, plus a little noise of its own. All chunks of the
// document about topic look alike to it, and the question looks like all
// of them.
func topicVector(topic string) func(string) []float32 {
	on, off := randomVector(hashSeed("on-topic")), randomVector(hashSeed("off-topic"))
	return func(text string) []float32 {
		base := off
		for _, w := range textindex.Terms(text) {
			if w == topic {
				base = on
				break
			}
		}
		noise := randomVector(hashSeed(text))
		v := make([]float32, hybridDim)
		for i := range v {
			v[i] = base[i] + 0.2*noise[i]
		}
		return v
	}
}

// cooccurrence is a small distributional model learnt from a corpus, in
// the way of random indexing: each passage of the corpus gets a sparse
// random signature, a word's vector is the sum of the signatures of the
// passages it occurs in, and a text's vector the sum of its words'
// vectors (normalised, weighted by how rare the word is). Words that
// occur in the same passages come out close, so a question can meet a
// passage that says the same thing in other words, as a real embedding
// model does, if far less well. Words the corpus lacks get a random
// vector of their own.
type cooccurrence struct {
	words map[string][]float32
	idf   map[string]float64
	n     int
}

func newCooccurrence(corpus []string) *cooccurrence {
	m := &cooccurrence{words: map[string][]float32{}, idf: map[string]float64{}, n: len(corpus)}
	df := map[string]int{}
	for i, text := range corpus {
		var seedBytes [8]byte
		binary.LittleEndian.PutUint64(seedBytes[:], uint64(i))
		r := rand.New(rand.NewPCG(hashSeed(string(seedBytes[:])), uint64(i)))
		// A signature of 8 places set to ±1.
		places, signs := r.Perm(hybridDim)[:8], make([]float32, 8)
		for j := range signs {
			signs[j] = float32(2*r.IntN(2) - 1)
		}
		seen := map[string]bool{}
		for _, w := range textindex.Terms(text) {
			if seen[w] {
				continue
			}
			seen[w] = true
			df[w]++
			v := m.words[w]
			if v == nil {
				v = make([]float32, hybridDim)
				m.words[w] = v
			}
			for j, p := range places {
				v[p] += signs[j]
			}
		}
	}
	for w, n := range df {
		m.idf[w] = math.Log(1 + float64(len(corpus))/float64(n))
	}
	return m
}

func (m *cooccurrence) vector(text string) []float32 {
	out := make([]float32, hybridDim)
	for _, w := range textindex.Terms(text) {
		v, idf := m.words[w], m.idf[w]
		if v == nil {
			v, idf = randomVector(hashSeed("word:"+w)), math.Log(1+float64(m.n))
		}
		var norm float64
		for _, x := range v {
			norm += float64(x) * float64(x)
		}
		scale := float32(idf / math.Sqrt(norm))
		for i, x := range v {
			out[i] += scale * x
		}
	}
	if len(textindex.Terms(text)) == 0 {
		return randomVector(hashSeed(text)) // no word it knows: no direction to give
	}
	return out
}
