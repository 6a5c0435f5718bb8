package realtime

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"koe/internal/g711"
)

func TestParseAudioFormat(t *testing.T) {
	ulaw := AudioFormat{Encoding: EncodingULaw, Rate: 8000}
	alaw := AudioFormat{Encoding: EncodingALaw, Rate: 8000}
	for _, c := range []struct {
		in   string
		want AudioFormat
		err  string
	}{
		{`"pcm16"`, DefaultAudioFormat, ""},
		{`"g711_ulaw"`, ulaw, ""},
		{`"g711_alaw"`, alaw, ""},
		{`{"type":"audio/pcm","rate":24000}`, DefaultAudioFormat, ""},
		{`{"type":"audio/pcm"}`, DefaultAudioFormat, ""},
		{`{"type":"audio/pcm","rate":48000}`, AudioFormat{EncodingPCM16, 48000}, ""},
		{` {"type":"audio/pcmu"}`, ulaw, ""},
		{`{"type":"audio/pcma","rate":8000}`, alaw, ""},
		{`"opus"`, AudioFormat{}, `"opus" is not supported; use pcm16, g711_ulaw or g711_alaw`},
		{`{"type":"audio/pcm","rate":44056}`, AudioFormat{}, "44056 Hz is not supported"},
		{`{"type":"audio/pcmu","rate":16000}`, AudioFormat{}, "8000 Hz, not 16000"},
		{`{"type":"audio/mp3"}`, AudioFormat{}, `"audio/mp3" is not supported`},
		{`17`, AudioFormat{}, "must be a name"},
		{`"` + strings.Repeat("x", 500) + `"`, AudioFormat{}, "…\" is not supported"},
	} {
		got, err := ParseAudioFormat(json.RawMessage(c.in))
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: error %v, want one saying %q", c.in, err, c.err)
		}
	}
	// The names read back as they were written.
	for _, name := range []string{"pcm16", "g711_ulaw", "g711_alaw"} {
		f, _ := ParseAudioFormat(json.RawMessage(`"` + name + `"`))
		if f.BetaName() != name {
			t.Errorf("%s comes back as %s", name, f.BetaName())
		}
		back, err := ParseAudioFormat(f.MarshalGA())
		if err != nil || back != f {
			t.Errorf("%s as GA is %s, read back as %+v, %v", name, f.MarshalGA(), back, err)
		}
	}
}

func TestFormatDurations(t *testing.T) {
	pcm, ulaw := DefaultAudioFormat, AudioFormat{Encoding: EncodingULaw, Rate: 8000}
	if pcm.Bytes(1000) != 48000 || ulaw.Bytes(1000) != 8000 || pcm.Millis(48000) != 1000 || ulaw.Millis(8000) != 1000 {
		t.Fatalf("a second: %d, %d bytes; %d, %d ms", pcm.Bytes(1000), ulaw.Bytes(1000), pcm.Millis(48000), ulaw.Millis(8000))
	}
	if pcm.Bytes(1) != 48 || pcm.Millis(47) != 0 || ulaw.Millis(12) != 1 {
		t.Fatalf("a millisecond: %d bytes, %d, %d ms", pcm.Bytes(1), pcm.Millis(47), ulaw.Millis(12))
	}
}

func TestFormatEncodeDecode(t *testing.T) {
	samples := []int16{0, 1, -1, 32767, -32768, 1234, -4321}
	pcm := DefaultAudioFormat.Encode(nil, samples)
	if want := []byte{0, 0, 1, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0x80, 0xd2, 0x04, 0x1f, 0xef}; !bytes.Equal(pcm, want) {
		t.Fatalf("pcm16 % x, want % x", pcm, want)
	}
	// A chunk cut in the middle of a sample keeps the odd byte for the next.
	got, rest := DefaultAudioFormat.Decode(nil, pcm[:5])
	if len(got) != 2 || len(rest) != 1 {
		t.Fatalf("5 bytes: %d samples, %d left", len(got), len(rest))
	}
	got, rest = DefaultAudioFormat.Decode(got, append(rest, pcm[5:]...))
	if len(rest) != 0 || !equal16(got, samples) {
		t.Fatalf("decoded %v, want %v", got, samples)
	}
	for _, f := range []AudioFormat{{EncodingULaw, 8000}, {EncodingALaw, 8000}} {
		b := f.Encode(nil, samples)
		if len(b) != len(samples) {
			t.Fatalf("%s: %d bytes", f.BetaName(), len(b))
		}
		back, rest := f.Decode(nil, b)
		if len(rest) != 0 || len(back) != len(samples) {
			t.Fatalf("%s: %d samples, %d left", f.BetaName(), len(back), len(rest))
		}
		dec := g711.DecodeULaw
		if f.Encoding == EncodingALaw {
			dec = g711.DecodeALaw
		}
		for i, c := range b {
			if back[i] != dec(c) {
				t.Fatalf("%s sample %d: %d, want %d", f.BetaName(), i, back[i], dec(c))
			}
		}
	}
}

func equal16(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOutputEncoder renders espeak-ng's 22050 Hz into each output format:
// a second of speech plays a second, the tone stays where it was, and
// speech sent in pieces gives the bytes it gives whole.
func TestOutputEncoder(t *testing.T) {
	const from = 22050
	tone := rtaTone(from, 1000, -6)
	for _, f := range []AudioFormat{DefaultAudioFormat, {EncodingULaw, 8000}, {EncodingALaw, 8000}} {
		whole := NewOutputEncoder(f)
		b, err := whole.Encode(nil, tone, from)
		if err != nil {
			t.Fatal(err)
		}
		b = whole.Flush(b)
		if ms := f.Millis(len(b)); ms < 999 || ms > 1001 {
			t.Errorf("%s: a second of speech became %d ms", f.BetaName(), ms)
		}
		pieces := NewOutputEncoder(f)
		var p []byte
		for i := 0; i < len(tone); i += 1000 {
			p, _ = pieces.Encode(p, tone[i:min(i+1000, len(tone))], from)
		}
		p = pieces.Flush(p)
		if !bytes.Equal(p, b) {
			t.Errorf("%s: in pieces the speech encodes differently", f.BetaName())
		}
		samples, _ := f.Decode(nil, b)
		at150, at1000 := rtaGoertzel(samples, f.Rate, 150), rtaGoertzel(samples, f.Rate, 1000)
		if db := 10 * math.Log10(at150/at1000); db < 30 {
			t.Errorf("%s: the 150 Hz fundamental is only %.1f dB over 1 kHz", f.BetaName(), db)
		}
	}
	// A piece at another rate flushes the last and goes on at the new one.
	e := NewOutputEncoder(DefaultAudioFormat)
	b, _ := e.Encode(nil, tone[:from/2], from)
	b, err := e.Encode(b, rtaTone(24000, 500, -6), 24000)
	if err != nil {
		t.Fatal(err)
	}
	b = e.Flush(b)
	if ms := DefaultAudioFormat.Millis(len(b)); ms < 999 || ms > 1001 {
		t.Errorf("half a second at each rate became %d ms", ms)
	}
	if _, err := e.Encode(nil, tone, 44056); err == nil || !strings.Contains(err.Error(), "44056") {
		t.Errorf("an odd rate: %v", err)
	}
}

// Encoding a second of espeak-ng's 22050 Hz speech for the wire, and
// decoding a second of input: the per-second cost of each format.
func BenchmarkOutputEncoder(b *testing.B) {
	tone := rtaTone(22050, 1000, -6)
	for _, f := range []AudioFormat{DefaultAudioFormat, {EncodingULaw, 8000}} {
		b.Run(f.BetaName(), func(b *testing.B) {
			e := NewOutputEncoder(f)
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				out, _ = e.Encode(out[:0], tone, 22050)
				out = e.Flush(out)
			}
		})
	}
}
