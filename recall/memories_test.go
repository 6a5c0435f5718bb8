package recall_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"koe"
	"koe/recall"
)

// The memories API checks each request as a client's: the character, the
// words, the budget, the limit, the seq; what it answers is the service's.
func TestMemoriesAPI(t *testing.T) {
	r := newRig(t)
	uid := r.say("", "human: My dog is called Biscuit.", "ai: Biscuit is a fine name.")
	r.settle()
	api := recall.NewMemories(r.svc, recall.MemoriesOptions{
		Budget: func(c string) (int, bool) {
			switch c {
			case conf:
				return 400, true
			case "no_recall":
				return 0, true
			}
			return 0, false
		},
		MinBudget: 50, MaxBudget: 32000, DefaultBudget: 1000,
	})
	ctx := context.Background()
	kindOf := func(err error) koe.Kind {
		var e *koe.Error
		if !errors.As(err, &e) {
			return -1
		}
		return e.Kind
	}
	want := func(what string, err error, kind koe.Kind, says string) {
		t.Helper()
		if kindOf(err) != kind || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v (kind %v), want %v saying %q", what, err, kindOf(err), kind, says)
		}
	}

	got, err := api.Recall(ctx, conf, "dog", nil)
	if err != nil || got.Budget != 400 || !strings.Contains(got.Block, "Biscuit") || len(got.Memories) == 0 {
		t.Fatalf("recall: %+v, %v", got, err)
	}
	if got, err := api.Recall(ctx, "no_recall", "cat", nil); err != nil || got.Budget != 1000 || got.Memories == nil {
		t.Errorf("a character without recall: %+v, %v; want the default budget and no memories", got, err)
	}
	_, err = api.Recall(ctx, "nobody", "dog", nil)
	want("unknown character", err, koe.NotFound, `no character has conf_uid "nobody"`)
	if _, err := api.Recall(ctx, "../x", "dog", nil); !errors.Is(err, koe.ErrInvalidID) {
		t.Errorf("a bad conf_uid: %v", err)
	}
	_, err = api.Recall(ctx, conf, "  ", nil)
	want("empty words", err, koe.Invalid, `"q" is empty`)
	big := 40000
	_, err = api.Recall(ctx, conf, "dog", &big)
	want("budget over the range", err, koe.Invalid, "budget 40000 is out of range: 50 to 32000 tokens (this character's memory.recall_budget is 400)")

	list, err := api.List(ctx, conf, "", 0)
	if err != nil || list.ConfUID != conf || len(list.Memories) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	_, err = api.List(ctx, conf, "", 501)
	want("limit over the range", err, koe.Invalid, "limit 501 is out of range: 1 to 500 memories (default 50)")
	_, err = api.List(ctx, conf, "not a cursor", 0)
	want("bad cursor", err, koe.Invalid, "before must be the next of an earlier listing")

	_, err = api.ForgetConversation(ctx, "nobody", uid)
	want("forget for an unknown character", err, koe.NotFound, "no character")
	want("seq 0", api.Forget(ctx, conf, uid, 0), koe.Invalid, "seq must be a message id")
	want("unknown seq", api.Forget(ctx, conf, uid, 99), koe.NotFound, "no memory has seq 99")
	if err := api.Forget(ctx, conf, uid, list.Memories[0].Seq); err != nil {
		t.Fatalf("forget one: %v", err)
	}
	if n, err := api.ForgetEverything(ctx, conf); err != nil || n != 1 {
		t.Errorf("forget everything: %d, %v; want the one left", n, err)
	}
}
