package asr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/go-audio/wav"
)

func TestFloatsToPCM16RejectsBadSamples(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		want    []string // substrings of the error
	}{
		{"NaN", []float64{0, 0.1, math.NaN(), 0.2}, []string{"sample 2", "NaN"}},
		{"+Inf", []float64{math.Inf(1)}, []string{"sample 0", "+Inf"}},
		{"-Inf", []float64{0, math.Inf(-1)}, []string{"sample 1", "-Inf"}},
		{"too loud", []float64{0, 0.5, 1, 1.5, 2}, []string{"sample 3", "1.5"}},
		{"too loud negative", []float64{-1.02}, []string{"sample 0", "-1.02"}},
		{"just past tolerance", []float64{0, 1.0101}, []string{"sample 1", "1.0101"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FloatsToPCM16(tt.samples)
			if !errors.Is(err, ErrBadAudio) {
				t.Fatalf("FloatsToPCM16 = %v, %v; want an error wrapping ErrBadAudio", got, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestFloatsToPCM16Converts(t *testing.T) {
	in := []float64{0, 0.5, -0.5, 1, -1, 1.005, -1.005, 1.01, 0.25, 1.0 / 32767, -2.0 / 32767}
	want := []int16{0, 16384, -16384, 32767, -32767, 32767, -32767, 32767, 8192, 1, -2}
	got, err := FloatsToPCM16(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("FloatsToPCM16(%v)\n = %v\nwant %v", in, got, want)
	}

	got, err = FloatsToPCM16(nil)
	if err != nil || len(got) != 0 {
		t.Errorf("FloatsToPCM16(nil) = %v, %v; want no samples, no error", got, err)
	}
}

func TestPCM16FromBytes(t *testing.T) {
	got, err := PCM16FromBytes([]byte{0x01, 0x00, 0xff, 0xff, 0x00, 0x80, 0xff, 0x7f, 0x34, 0x12})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int16{1, -1, -32768, 32767, 0x1234}; !slices.Equal(got, want) {
		t.Errorf("PCM16FromBytes = %v, want %v", got, want)
	}

	if got, err := PCM16FromBytes(nil); err != nil || len(got) != 0 {
		t.Errorf("PCM16FromBytes(nil) = %v, %v; want no samples, no error", got, err)
	}

	_, err = PCM16FromBytes([]byte{1, 2, 3})
	if !errors.Is(err, ErrBadAudio) {
		t.Fatalf("PCM16FromBytes(3 bytes) error = %v, want ErrBadAudio", err)
	}
	if !strings.Contains(err.Error(), "3 bytes") {
		t.Errorf("error %q does not say how many bytes came", err)
	}
}

func TestEncodeWAV(t *testing.T) {
	ramp := make([]int16, 20000) // more than one encoder chunk
	for i := range ramp {
		ramp[i] = int16(i*7 - 70000/2)
	}
	ramp[0], ramp[1] = math.MinInt16, math.MaxInt16
	for _, tc := range []struct {
		name    string
		samples []int16
		rate    int
	}{
		{"empty", nil, SampleRate},
		{"short", []int16{0, 1, -1, 32767, -32768}, SampleRate},
		{"long at 22050", ramp, 22050},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := EncodeWAV(tc.samples, tc.rate)
			if want := 44 + 2*len(tc.samples); len(b) != want {
				t.Fatalf("%d bytes, want %d (canonical header + data)", len(b), want)
			}
			le := binary.LittleEndian
			if riffSize := le.Uint32(b[4:8]); int(riffSize) != len(b)-8 {
				t.Errorf("RIFF size %d, want %d", riffSize, len(b)-8)
			}
			if string(b[36:40]) != "data" || int(le.Uint32(b[40:44])) != 2*len(tc.samples) {
				t.Errorf("data chunk header %q %d, want \"data\" %d", b[36:40], le.Uint32(b[40:44]), 2*len(tc.samples))
			}

			dec := wav.NewDecoder(bytes.NewReader(b))
			if !dec.IsValidFile() {
				t.Fatal("go-audio does not take it for a valid WAV")
			}
			if dec.SampleRate != uint32(tc.rate) || dec.NumChans != 1 || dec.BitDepth != 16 || dec.WavAudioFormat != 1 {
				t.Errorf("format %d Hz, %d channels, %d bits, tag %d; want %d Hz mono 16-bit PCM",
					dec.SampleRate, dec.NumChans, dec.BitDepth, dec.WavAudioFormat, tc.rate)
			}
			if len(tc.samples) == 0 {
				return
			}
			buf, err := dec.FullPCMBuffer()
			if err != nil {
				t.Fatal(err)
			}
			if len(buf.Data) != len(tc.samples) {
				t.Fatalf("decoded %d samples, want %d", len(buf.Data), len(tc.samples))
			}
			for i, v := range buf.Data {
				if int16(v) != tc.samples[i] {
					t.Fatalf("sample %d decodes to %d, want %d", i, v, tc.samples[i])
				}
			}
		})
	}
}
