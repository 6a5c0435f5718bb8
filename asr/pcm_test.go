package asr

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
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
