package memorycmd

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"koe/recall/locomo"
	"koe/testkit/fakellm"
)

const miniData = "../../../../recall/locomo/testdata/mini.json"

// TestEvalEmbeddings runs `koe eval locomo -embeddings` against an
// OpenAI-compatible endpoint over real HTTP: every message is embedded
// with the model named, every question too (the hybrid path a live turn
// takes), with the key from KOE_EMBEDDINGS_API_KEY.
func TestEvalEmbeddings(t *testing.T) {
	srv, err := fakellm.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	getenv := func(k string) string {
		if k == "KOE_EMBEDDINGS_API_KEY" {
			return "sekrit"
		}
		return ""
	}
	var out, errs bytes.Buffer
	args := []string{"locomo", "-data", miniData, "-budget", "1000", "-embeddings", srv.URL(), "-embeddings-model", "nomic-test"}
	if code := Eval(context.Background(), args, &out, &errs, getenv); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "Ranking by keywords and nomic-test's vectors") || !strings.Contains(out.String(), "6 questions") {
		t.Errorf("output:\n%s", out.String())
	}
	samples, err := locomo.Load(miniData)
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, r := range srv.EmbeddingRequests() {
		if r.Model != "nomic-test" || r.Header.Get("Authorization") != "Bearer sekrit" {
			t.Errorf("request for model %q with authorization %q", r.Model, r.Header.Get("Authorization"))
		}
		inputs = append(inputs, r.Input...)
	}
	for _, sess := range samples[0].Sessions {
		for _, turn := range sess.Turns {
			if !slices.Contains(inputs, turn.Text) {
				t.Errorf("message %q was not embedded", turn.Text)
			}
		}
	}
	for _, q := range samples[0].QA {
		if q.Category != locomo.Adversarial && !slices.Contains(inputs, q.Question) {
			t.Errorf("question %q was not embedded: the vectors took no part", q.Question)
		}
	}
}

// TestEvalEmbeddingsRefused: an endpoint that fails makes no keyword
// figures passed off as hybrid ones; -embeddings without a model is a
// usage error.
func TestEvalEmbeddingsRefused(t *testing.T) {
	srv, err := fakellm.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply {
		return fakellm.EmbeddingReply{Status: 404, ErrorMessage: `model "nomic-test" not found, try pulling it first`}
	})
	var out, errs bytes.Buffer
	args := []string{"locomo", "-data", miniData, "-budget", "1000", "-embeddings", srv.URL(), "-embeddings-model", "nomic-test"}
	if code := Eval(context.Background(), args, &out, &errs, nil); code != 1 || !strings.Contains(errs.String(), "gave vectors for 0 of 7 messages") {
		t.Errorf("failing endpoint: exit %d, stderr %q", code, errs.String())
	}
	errs.Reset()
	if code := Eval(context.Background(), args[:len(args)-2], &out, &errs, nil); code != 2 || !strings.Contains(errs.String(), "-embeddings-model") {
		t.Errorf("no model: exit %d, stderr %q", code, errs.String())
	}
}

// TestEvalLeaveOneOutNeedsTwo: -loo on one conversation says why not.
func TestEvalLeaveOneOutNeedsTwo(t *testing.T) {
	var out, errs bytes.Buffer
	code := Eval(context.Background(), []string{"locomo", "-data", miniData, "-budget", "1000", "-loo"}, &out, &errs, nil)
	if code != 1 || !strings.Contains(errs.String(), "at least two conversations") {
		t.Errorf("exit %d, stderr %q", code, errs.String())
	}
}
