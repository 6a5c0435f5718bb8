package app_test

import (
	"slices"
	"strings"
	"testing"

	"koe/protocol"
	"koe/testkit"
)

// TestSceneSkipBeforeAnythingHeard: a line skipped while its character is
// still thinking (nothing of it heard) leaves a mark in the transcript:
// the next character is given it and the scene goes on to real lines,
// its rounds each with something said.
func TestSceneSkipBeforeAnythingHeard(t *testing.T) {
	k := startSceneKoe(t, nil)
	// Mio's first line waits in the model, before its first sentence.
	k.gateOn("Koe: Koe line 1.")
	in := k.startScene(protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "tea", MaxRounds: 3})
	testkit.Eventually(t, "Mio's first line is asked", func() bool { return len(k.lineRequests()) == 2 })
	if got := k.command(in.ID, "skip"); got.ID != in.ID {
		t.Fatalf("skip answered %+v", got)
	}
	end := k.awaitScene("the scene ends", in.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	want := []string{"Streamer: tea", "Koe: Koe line 1.", "Mio:  ~", "Koe: Koe line 2.", "Mio: Mio line 2.", "Koe: Koe line 3.", "Mio: Mio line 3."}
	if got := sceneTexts(end); !slices.Equal(got, want) || end.Rounds != 3 || end.EndReason != protocol.SceneEndRounds {
		t.Fatalf("scene: %q, %d rounds, ended %q; want %q after 3 rounds", got, end.Rounds, end.EndReason, want)
	}
	reqs := k.lineRequests()
	if len(reqs) != 6 || !strings.Contains(reqs[2], "Mio: (cut off before saying anything)") ||
		!strings.Contains(reqs[3], "Mio: (cut off before saying anything)\nKoe: Koe line 2.") {
		t.Errorf("the lines' requests %q, want the cut-off line given to Koe, then to Mio before Koe's", reqs)
	}
}

// TestSceneSilentCharacters: a character whose model says nothing leaves
// a mark its partner answers; when every character in a row has said
// nothing, the scene ends saying so instead of running through empty
// rounds.
func TestSceneSilentCharacters(t *testing.T) {
	k := startSceneKoe(t, nil)
	k.mu.Lock()
	k.empty["Mio"] = true
	k.mu.Unlock()
	in := k.startScene(protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "tea", MaxRounds: 2})
	end := k.awaitScene("the scene ends", in.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	want := []string{"Streamer: tea", "Koe: Koe line 1.", "Koe: Koe line 2."}
	if got := sceneTexts(end); !slices.Equal(got, want) || end.Rounds != 2 || end.EndReason != protocol.SceneEndRounds {
		t.Fatalf("scene with Mio silent: %q, %d rounds, ended %q; want %q after 2 rounds", got, end.Rounds, end.EndReason, want)
	}
	if reqs := k.lineRequests(); len(reqs) != 4 || !strings.Contains(reqs[2], "Mio: (says nothing)") {
		t.Errorf("the lines' requests %q, want Koe given Mio's silence", reqs)
	}

	k.mu.Lock()
	k.empty["Koe"] = true
	k.mu.Unlock()
	in = k.startScene(protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "coffee", MaxRounds: 50})
	end = k.awaitScene("the silent scene ends", in.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	if got := sceneTexts(end); end.EndReason != protocol.SceneEndSilent || end.Rounds != 0 || !slices.Equal(got, []string{"Streamer: coffee"}) {
		t.Fatalf("scene with both silent: %q, %d rounds, ended %q; want it ended %q at once", got, end.Rounds, end.EndReason, protocol.SceneEndSilent)
	}
	if n := len(k.lineRequests()); n != 6 {
		t.Errorf("%d lines asked in all, want 2 for the silent scene", n-4)
	}
}
