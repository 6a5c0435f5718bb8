package server_test

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"

	"koe/config"
	"koe/knowledge"
	"koe/testkit/fakellm"
)

// unrelatedEmbeddings makes the fake endpoint a model that knows nothing
// of the documents: each text gets a random vector of its own, seeded by
// the text, so no two texts are nearer than chance.
func unrelatedEmbeddings(llm *fakellm.Server) {
	llm.SetEmbeddings(func(req fakellm.EmbeddingRequest) fakellm.EmbeddingReply {
		out := make([][]float32, len(req.Input))
		for i, text := range req.Input {
			h := fnv.New64a()
			_, _ = h.Write([]byte(text)) // a hash never fails to write
			r := rand.New(rand.NewPCG(h.Sum64(), 1))
			out[i] = make([]float32, 96)
			for j := range out[i] {
				out[i][j] = float32(r.NormFloat64())
			}
		}
		return fakellm.EmbeddingReply{Vectors: out}
	})
}

// The case as users meet it: the local store with an embeddings
// endpoint whose model knows nothing of the documents, a knowledge base
// too large to read whole (the SQLite manual and an observatory's
// handbook), and both wordings of a question whose answer is one sentence
// of the handbook. The auto router reads passages (never "Nothing in the
// documents bears on this"), and the answer sentence reaches the model.
func TestRAGHybridUnrelatedModelKeepsAnswer(t *testing.T) {
	e := ragStart(t, answer("A Ritchey-Chrétien reflector, bought in 1998 [1]."), func(c *config.Config) {
		c.Knowledge.Store = knowledge.StoreLocal
		c.Embeddings.BaseURL, c.Embeddings.Model = c.Character.LLM.BaseURL, "fake-embed"
	})
	unrelatedEmbeddings(e.llm)
	e.addManual()
	e.add("observatory/kumo-dome.md", "observatory/bakery.md")
	if n := len(e.llm.EmbeddingRequests()); n == 0 {
		t.Fatal("nothing was embedded: the test would not exercise the hybrid search")
	}
	c := dialKoe(t, e.koe.Addr())
	for i, q := range []string{
		"Which telescope does the Kumo Dome observatory use, and when was it bought?",
		"What telescope does Kumo Dome use?",
	} {
		before := len(e.llm.EmbeddingRequests())
		frames := c.turn(q)
		if len(e.llm.EmbeddingRequests()) == before {
			t.Fatalf("%q: the question was not embedded", q)
		}
		if hasStatus(frames, "knowledge end Nothing in the documents bears on this") || !hasStatus(frames, "knowledge end Found ") ||
			!strings.Contains(strings.Join(statuses(frames), "\n"), "kumo-dome.md") {
			t.Fatalf("%q: the search found nothing in kumo-dome.md: %q", q, statuses(frames))
		}
		reqs := e.since(i)
		docs := ragDocuments(t, lastUser(t, reqs[0]))
		if len(docs) != 1 || len(docs[0]) == 0 {
			t.Fatalf("%q: no documents reached the model", q)
		}
		if first := docs[0][0]; first.Metadata["file"] != "kumo-dome.md" || !strings.Contains(strings.Join(strings.Fields(first.Contents), " "), "bought in 1998") {
			t.Errorf("%q: the first passage is %s %q, want the handbook's answer", q, first.Metadata["file"], first.Metadata["section"])
		}
	}
}
