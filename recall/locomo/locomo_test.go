package locomo

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"koe/agent"
)

func TestLoad(t *testing.T) {
	samples, err := Load("testdata/mini.json")
	if err != nil {
		t.Fatal(err)
	}
	s := samples[0]
	if s.ID != "mini-1" || s.SpeakerA != "Ada" || s.SpeakerB != "Ben" || len(s.Sessions) != 2 || len(s.QA) != 7 {
		t.Fatalf("sample %+v", s)
	}
	if got := s.Sessions[1].Date.Format("2006-01-02 15:04"); got != "2024-04-19 18:40" {
		t.Errorf("session 2 date %s", got)
	}
	if got := s.Sessions[1].Turns[0].Text; got != "I signed up for a pottery class on Thursdays. [shares a photo: a photo of a clay bowl on a wheel]" {
		t.Errorf("caption not kept: %q", got)
	}
	for _, bad := range []string{`[]x`, `[{"conversation":{"speaker_a":"A","speaker_b":"B"}}]`,
		`[{"conversation":{"speaker_a":"A","speaker_b":"B","session_1":[],"session_1_date_time":"yesterday"}}]`} {
		path := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil {
			t.Errorf("Load(%s) accepted it", bad)
		}
	}
}

// TestRunMini: every answerable question whose evidence exists is found
// at a budget that holds the whole conversation; the one citing a message
// that does not exist never is; category 5 is left out.
func TestRunMini(t *testing.T) {
	samples, err := Load("testdata/mini.json")
	if err != nil {
		t.Fatal(err)
	}
	tok := agent.NewTokenizer("")
	rep, err := Run(context.Background(), samples, Options{Budgets: []int{60, 1000}, Dir: t.TempDir(), Count: tok.Count})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Messages != 7 || rep.Questions != 6 {
		t.Fatalf("report %+v", rep)
	}
	big := rep.Results[1]
	if big.Found != 5 || big.ByCategory[1].Found != 1 || big.ByCategory[3].Found != 1 {
		t.Errorf("at 1000 tokens found %d of %d, by category %+v", big.Found, big.Questions, big.ByCategory)
	}
	small := rep.Results[0]
	if small.Found >= big.Found || small.Tokens > 60*small.Questions {
		t.Errorf("at 60 tokens found %d using %d tokens: a tiny budget cannot hold everything", small.Found, small.Tokens)
	}
}

// TestDevConversation runs the evaluation on the first LoCoMo dev
// conversation, with a floor under its score. The data is not part of
// koe; the test finds it at KOE_LOCOMO_DATA or next to the checkout.
func TestDevConversation(t *testing.T) {
	path := os.Getenv("KOE_LOCOMO_DATA")
	if path == "" {
		path = "../../../shared/data/locomo-dev.json"
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no LoCoMo data at %s (set KOE_LOCOMO_DATA): %v", path, err)
	}
	samples, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tok := agent.NewTokenizer("")
	rep, err := Run(context.Background(), samples[:1], Options{Budgets: []int{2000}, Dir: t.TempDir(), Count: tok.Count})
	if err != nil {
		t.Fatal(err)
	}
	const floor = 0.80 // measured 0.842 when the floor was set
	if got := rep.Share(2000); got < floor {
		t.Errorf("found the evidence of %.1f%% of the questions at 2000 tokens, want at least %.0f%%", 100*got, 100*floor)
	}
	for _, res := range rep.Results {
		if res.Tokens > res.Budget*res.Questions {
			t.Errorf("blocks used %d tokens over %d questions at budget %d", res.Tokens, res.Questions, res.Budget)
		}
	}
}
