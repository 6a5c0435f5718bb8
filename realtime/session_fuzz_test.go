package realtime

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// Whatever a client sends as session.update's session, apply either
// takes all of it or none: a refused update leaves the settings as they
// were and says why with a client error; a taken one renders in both
// dialects.
func FuzzSessionUpdate(f *testing.F) {
	for _, s := range []string{
		`{"type":"realtime","instructions":"hi","output_modalities":["text"],"max_output_tokens":77}`,
		`{"modalities":["text","audio"],"voice":"ash","temperature":0.7,"max_response_output_tokens":"inf"}`,
		`{"audio":{"input":{"format":{"type":"audio/pcmu"},"turn_detection":null},"output":{"format":{"type":"audio/pcm","rate":24000},"voice":{"id":"v"},"speed":1.2}}}`,
		`{"output_audio_format":"g711_alaw","input_audio_format":"pcm16","tools":[],"tool_choice":"auto"}`,
		`{"temperature":5}`, `{"audio":{"output":{"format":{"type":"audio/pcm","rate":8000}}}}`, `{"tools":{}}`, `{"type":"transcription"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var u sessionUpdate
		if json.Unmarshal(data, &u) != nil {
			return
		}
		for _, d := range []dialect{{}, {beta: true}} {
			before := defaultConfig(d)
			after, err := before.apply(u)
			if err != nil {
				var ce *clientError
				if !errors.As(err, &ce) || ce.message == "" || ce.code == "" {
					t.Fatalf("refused without a client error: %v", err)
				}
				if !reflect.DeepEqual(after, before) {
					t.Fatalf("a refused update changed the settings")
				}
				continue
			}
			if _, err := json.Marshal(after.render(d, "sess_x", 0)); err != nil {
				t.Fatalf("the session does not render: %v", err)
			}
		}
	})
}
