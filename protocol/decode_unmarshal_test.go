package protocol

import (
	"reflect"
	"strings"
	"testing"
)

// decodeSeeds are frames of every kind Decode meets, the fuzz targets'
// seeds: valid ones, and ones that only the Decoder's reading accepts or
// words.
var decodeSeeds = []string{
	`{"type":"text-input","text":"hi","images":[]}`,
	`{"type":"text-input","images":[{"source":"camera","data":"data:image/png;base64,AAAA","mime_type":"image/png"}]}`,
	`{"type":"mic-audio-data","audio":[0,0.5,-1]}`,
	`{"type":"raw-audio-config","sample_rate":48000}`,
	`{"type":"fetch-history-page","history_uid":"h","before":12,"limit":3}`,
	`{"type":"set-system-prompt","prompt":null}`,
	`{"type":"set-compression-rate","rate":-1e308}`,
	`{"type":{"nested":[[[{}]]]}}`,
	`{"type":"x","text":"\ud800"}`,
	`{"type":"frontend-playback-complete"}`,
	`  {"Type":"text-input","TEXT":"case"}` + "\n",
	`{"type":"x"}` + "\v\u00a0",
	`{"type":"x"}}`, `{"type":"a"}{"type":"b"}`, `{"type":"text-input","text":5}`,
	`{"type":"mic-audio-data","audio":[1e999]}`, `{"type":`, `[1,2]`,
	`null`, `""`, `{}`, `[]`, `{"type":""}`, `{"text":"hi"}`, ``,
	strings.Repeat("[", 20000),
}

// FuzzDecodeAsTheDecoderDid: Decode gives every frame the message or the
// error the Decoder alone gives (as Decode did before it tried Unmarshal
// first).
func FuzzDecodeAsTheDecoderDid(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := Decode(data)
		want, wantErr := decodeWithDecoder(data)
		if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("Decode(%q) = %v, the Decoder gave %v", data, gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %+v, the Decoder gave %+v", data, got, want)
		}
	})
}

// BenchmarkDecode reads the frames an OLV client sends in a typed turn.
//
//	go test ./protocol -run '^$' -bench Decode -benchmem
func BenchmarkDecode(b *testing.B) {
	frames := [][]byte{
		[]byte(`{"type":"text-input","text":"Can you help me plan my week?","images":[]}`),
		[]byte(`{"type":"frontend-playback-complete"}`),
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range frames {
			if _, err := Decode(f); err != nil {
				b.Fatal(err)
			}
		}
	}
}
