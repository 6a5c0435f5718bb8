package conversation

import (
	"encoding/json"
	"testing"

	"koe/protocol"
)

// The greeting's set-model-and-conf frame reads as it did when model_info
// was encoded with every greeting, for the map asked about last and for
// one asked about after it, and a model_info that does not encode still
// fails the frame.
func TestModelInfoFrameAsEncodedWithEachGreeting(t *testing.T) {
	mao := map[string]any{
		"name": "mao_pro", "kScale": 0.5, "initialScale": nil, "note": "<b>&</b>",
		"emotionMap": map[string]any{"Joy": 3, "sadness": 1},
		"tapMotions": map[string]any{"HitAreaHead": map[string]any{"": 1}},
	}
	other := map[string]any{"name": "shizuku", "emotionMap": map[string]any{"anger": 2}}
	frame := func(mi any) string {
		t.Helper()
		data, err := json.Marshal(protocol.SetModelAndConf{Type: protocol.TypeSetModelAndConf, ModelInfo: mi, ConfUID: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	for _, m := range []map[string]any{mao, mao, other, mao, nil} {
		u := modelInfoOf(m)
		if got, want := frame(u.frame), frame(m); got != want {
			t.Errorf("frame = %s, want %s", got, want)
		}
		want := emotionMap(m)
		if len(u.emotion) != len(want) || len(u.keywords) != len(want) {
			t.Errorf("emotions = %v (keywords %v), want %v", u.emotion, u.keywords, want)
		}
		for _, k := range u.keywords {
			if u.emotion[k] != want[k] {
				t.Errorf("emotion %q = %v, want %v", k, u.emotion[k], want[k])
			}
		}
	}
	if a, b := modelInfoOf(mao), modelInfoOf(mao); a != b {
		t.Error("the same map was encoded twice in a row")
	}

	broken := map[string]any{"name": "x", "bad": make(chan int)}
	if _, err := json.Marshal(protocol.SetModelAndConf{ModelInfo: modelInfoOf(broken).frame}); err == nil {
		t.Error("a model_info that does not encode gave a frame")
	}
}
