package tts

import (
	"math"
	"testing"
)

func TestVolumesSilence(t *testing.T) {
	v := Volumes(make([]int16, 22050), 22050, 20)
	if len(v) != 50 {
		t.Fatalf("len = %d, want 50", len(v))
	}
	for i, x := range v {
		if x != 0 {
			t.Fatalf("slice %d = %g, want 0", i, x)
		}
	}
}

func TestVolumesRatios(t *testing.T) {
	// 20 ms at 22050 Hz is 441 samples. A square wave of amplitude A has
	// RMS A, so the ratios are exact.
	square := func(amp int16, n int) []int16 {
		s := make([]int16, n)
		for i := range s {
			s[i] = amp
			if i%2 == 1 {
				s[i] = -amp
			}
		}
		return s
	}
	var samples []int16
	samples = append(samples, square(16000, 441)...)
	samples = append(samples, square(8000, 441)...)
	samples = append(samples, square(4000, 441)...)
	samples = append(samples, make([]int16, 441)...)
	v := Volumes(samples, 22050, 20)
	want := []float64{1, 0.5, 0.25, 0}
	if len(v) != len(want) {
		t.Fatalf("len = %d, want %d", len(v), len(want))
	}
	for i := range want {
		if math.Abs(v[i]-want[i]) > 1e-9 {
			t.Errorf("slice %d = %g, want %g", i, v[i], want[i])
		}
	}
	// The loudest slice is exactly 1, whatever its level.
	v = Volumes(sine(4410, 22050, 220, 0.1), 22050, 20)
	top := 0.0
	for _, x := range v {
		top = max(top, x)
	}
	if top != 1 {
		t.Errorf("loudest = %g, want exactly 1", top)
	}
}

func TestVolumesPartialLastSlice(t *testing.T) {
	// 2 whole slices plus 10 samples: the short slice still counts, and its
	// RMS is over its own 10 samples (a loud tail is loud, not diluted).
	samples := make([]int16, 441*2+10)
	for i := 441 * 2; i < len(samples); i++ {
		samples[i] = 1000
	}
	samples[0] = 500
	v := Volumes(samples, 22050, 20)
	if len(v) != 3 {
		t.Fatalf("len = %d, want 3", len(v))
	}
	if v[2] != 1 || v[1] != 0 || v[0] <= 0 || v[0] >= 0.1 {
		t.Errorf("volumes = %v", v)
	}
}

func TestVolumesLength(t *testing.T) {
	// len = ceil(duration / slice) for rates where a slice is not a whole
	// number of samples too (11025 Hz: 220.5 samples per 20 ms).
	for _, tc := range []struct{ n, rate, ms, want int }{
		{1, 22050, 20, 1},
		{441, 22050, 20, 1},
		{442, 22050, 20, 2},
		{11025, 11025, 20, 50},
		{11026, 11025, 20, 51},
		{221, 11025, 20, 2},
		{220, 11025, 20, 1},
		{24000, 24000, 20, 50},
		{24000, 24000, 30, 34},
		{48000 * 3, 48000, 1000, 3},
		{100, 8000, 1, 13},
	} {
		v := Volumes(make([]int16, tc.n), tc.rate, tc.ms)
		if len(v) != tc.want {
			t.Errorf("n=%d rate=%d slice=%dms: len = %d, want %d", tc.n, tc.rate, tc.ms, len(v), tc.want)
		}
	}
}

func TestVolumesOddInputs(t *testing.T) {
	s := sine(1000, 22050, 100, 1)
	for _, tc := range []struct {
		name     string
		samples  []int16
		rate, ms int
	}{
		{"no samples", nil, 22050, 20},
		{"zero rate", s, 0, 20},
		{"negative rate", s, -22050, 20},
		{"zero slice", s, 22050, 0},
		{"negative slice", s, 22050, -5},
		{"slice under one sample", s, 100, 1},
		{"absurd rate", s, math.MaxInt, 20},
		{"absurd slice", s, 22050, math.MaxInt},
	} {
		v := Volumes(tc.samples, tc.rate, tc.ms)
		if v == nil || len(v) != 0 {
			t.Errorf("%s: %v, want an empty non-nil slice", tc.name, v)
		}
	}
	// A slice longer than the audio is one value.
	if v := Volumes(s, 22050, 60_000); len(v) != 1 || v[0] != 1 {
		t.Errorf("long slice: %v", v)
	}
	// Full-scale negative samples do not overflow.
	v := Volumes([]int16{math.MinInt16, math.MinInt16}, 100, 10)
	if len(v) != 2 || v[0] != 1 || v[1] != 1 {
		t.Errorf("full scale: %v", v)
	}
}
