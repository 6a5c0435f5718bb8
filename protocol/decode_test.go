package protocol

import (
	"strings"
	"testing"
)

func TestDecodeWordsErrorsForPeople(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"text-input","text":5}`, `"text" must be a string, not a number`},
		{`{"type":"text-input","images":"x"}`, `"images" must be an array, not a string`},
		{`{"type":"mic-audio-data","audio":[0.1,"x"]}`, `"audio" must be a number, not a string`},
		{`{"type":"raw-audio-config","sample_rate":4.5}`, `"sample_rate" must be a whole number, not a number`},
		{`{"type":"set-compression-rate","rate":true}`, `"rate" must be a number, not true or false`},
		{`[1,2]`, `must be a JSON object, not an array`},
		{`{"type":`, `ends too early`},
		{`{"type":"x"}}`, `nothing after it`},
		{`{"type":"a"}{"type":"b"}`, `one JSON object per frame`},
		{`{"text":"hi"}`, `no "type"`},
		{`{"type":"mic-audio-data","audio":[1e999]}`, `"audio" must be a number`},
		{strings.Repeat("[", 20000), "nested too deeply"},
	} {
		_, err := Decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%.40q) = %v, want it to say %q", tc.in, err, tc.want)
		}
	}
}

// FuzzDecode: any bytes give either a message with a type or an error
// worded for people, never a panic and never Go's type names.
func FuzzDecode(f *testing.F) {
	for _, seed := range decodeSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := Decode(data)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "invalid message: ") || strings.Contains(msg, "Go ") || strings.Contains(msg, "protocol.") || len(msg) > 200 {
				t.Fatalf("error for people? %q", msg)
			}
			return
		}
		if in.Type == "" {
			t.Fatalf("decoded a message without a type from %q", data)
		}
	})
}
