package realtime

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"testing"

	"koe/asr"
	"koe/internal/g711"
)

func TestFormatDurations(t *testing.T) {
	if formatPCM.bytes(1000) != 48000 || formatPCMU.bytes(1000) != 8000 || formatPCM.millis(48000) != 1000 || formatPCMA.millis(8000) != 1000 {
		t.Fatalf("a second: %d, %d bytes; %d, %d ms", formatPCM.bytes(1000), formatPCMU.bytes(1000), formatPCM.millis(48000), formatPCMA.millis(8000))
	}
	if formatPCM.bytes(1) != 48 || formatPCM.millis(47) != 0 || formatPCMU.millis(12) != 1 {
		t.Fatalf("a millisecond: %d bytes, %d, %d ms", formatPCM.bytes(1), formatPCM.millis(47), formatPCMU.millis(12))
	}
}

func TestFormatEncodeDecode(t *testing.T) {
	samples := []int16{0, 1, -1, 32767, -32768, 1234, -4321}
	pcm := formatPCM.encode(nil, samples)
	if want := []byte{0, 0, 1, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0x80, 0xd2, 0x04, 0x1f, 0xef}; !bytes.Equal(pcm, want) {
		t.Fatalf("pcm16 % x, want % x", pcm, want)
	}
	// A chunk cut in the middle of a sample keeps the odd byte for the next.
	got, rest := formatPCM.decode(nil, pcm[:5])
	if len(got) != 2 || len(rest) != 1 {
		t.Fatalf("5 bytes: %d samples, %d left", len(got), len(rest))
	}
	got, rest = formatPCM.decode(got, append(rest, pcm[5:]...))
	if len(rest) != 0 || !slices.Equal(got, samples) {
		t.Fatalf("decoded %v, want %v", got, samples)
	}
	for _, f := range []audioFormat{formatPCMU, formatPCMA} {
		b := f.encode(nil, samples)
		if len(b) != len(samples) {
			t.Fatalf("%s: %d bytes", f.betaName(), len(b))
		}
		back, rest := f.decode(nil, b)
		if len(rest) != 0 || len(back) != len(samples) {
			t.Fatalf("%s: %d samples, %d left", f.betaName(), len(back), len(rest))
		}
		enc, dec := g711.EncodeULaw, g711.DecodeULaw
		if f == formatPCMA {
			enc, dec = g711.EncodeALaw, g711.DecodeALaw
		}
		for i, c := range b {
			if c != enc(samples[i]) || back[i] != dec(c) {
				t.Fatalf("%s sample %d: %#02x → %d", f.betaName(), i, c, back[i])
			}
		}
	}
}

// rtaWAV is a sentence's audio as the turn sends it: a base64 WAV.
func rtaWAV(samples []int16, rate int) string {
	return base64.StdEncoding.EncodeToString(asr.EncodeWAV(samples, rate))
}

// TestOutputFormats renders a second of espeak-ng's 22050 Hz into each
// output format: it plays a second, and its fundamental stays where it
// was.
func TestOutputFormats(t *testing.T) {
	const from = 22050
	wav := rtaWAV(rtaTone(from, 1000, -6), from)
	for _, f := range []audioFormat{formatPCM, formatPCMU, formatPCMA} {
		deltas, err := newAudioEncoder(f).encode(wav)
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		for _, d := range deltas {
			raw, err := base64.StdEncoding.DecodeString(d)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, raw...)
		}
		if ms := f.millis(len(b)); ms < 999 || ms > 1001 {
			t.Errorf("%s: a second of speech became %d ms", f.betaName(), ms)
		}
		samples, _ := f.decode(nil, b)
		at150, at1000 := rtaGoertzel(samples, f.rate, 150), rtaGoertzel(samples, f.rate, 1000)
		if db := 10 * math.Log10(at150/at1000); db < 30 {
			t.Errorf("%s: the 150 Hz fundamental is only %.1f dB over 1 kHz", f.betaName(), db)
		}
	}
}

// BenchmarkOutputFormats is the cost of a second of espeak-ng's speech
// (22050 Hz) made into deltas of each format.
func BenchmarkOutputFormats(b *testing.B) {
	wav := rtaWAV(rtaTone(22050, 1000, -6), 22050)
	for _, f := range []audioFormat{formatPCM, formatPCMU} {
		b.Run(f.betaName(), func(b *testing.B) {
			e := newAudioEncoder(f)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.encode(wav); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
