package asr

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// rsSine is seconds of a sine at freq Hz, amplitude amp of full scale.
func rsSine(rate int, freq, amp, seconds float64) []int16 {
	out := make([]int16, int(float64(rate)*seconds))
	for i := range out {
		out[i] = int16(math.Round(amp * 32767 * math.Sin(2*math.Pi*freq*float64(i)/float64(rate))))
	}
	return out
}

func rsRMS(x []int16) float64 {
	var sum float64
	for _, v := range x {
		sum += float64(v) * float64(v)
	}
	return math.Sqrt(sum / float64(len(x)))
}

func rsDB(ratio float64) float64 { return 20 * math.Log10(ratio) }

// rsGoertzel is the power of x at freq Hz (one DFT bin).
func rsGoertzel(x []int16, rate int, freq float64) float64 {
	coef := 2 * math.Cos(2*math.Pi*freq/float64(rate))
	var s1, s2 float64
	for _, v := range x {
		s0 := float64(v) + coef*s1 - s2
		s2, s1 = s1, s0
	}
	return s1*s1 + s2*s2 - coef*s1*s2
}

// rsZeroCrossFreq estimates a tone's frequency from its upward zero
// crossings, interpolated between samples.
func rsZeroCrossFreq(x []int16, rate int) float64 {
	first, last, n := -1.0, -1.0, 0
	for i := 1; i < len(x); i++ {
		a, b := float64(x[i-1]), float64(x[i])
		if a < 0 && b >= 0 {
			at := float64(i-1) + a/(a-b)
			if first < 0 {
				first = at
			} else {
				n++
			}
			last = at
		}
	}
	return float64(n) / ((last - first) / float64(rate))
}

// rsResample runs a whole stream through a fresh Resampler.
func rsResample(t testing.TB, from, to int, in []int16) []int16 {
	t.Helper()
	r, err := NewResampler(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return append(r.Process(in), r.Flush()...)
}

// rsSteady is x without its first and last 50 ms, where the filter sees
// the silence around the stream.
func rsSteady(x []int16, rate int) []int16 {
	edge := rate / 20
	return x[edge : len(x)-edge]
}

func TestResamplerKeepsToneAndLevel(t *testing.T) {
	const amp = 0.5
	for _, tc := range []struct{ from, to int }{
		{48000, 16000}, {44100, 16000}, {32000, 16000}, {24000, 16000}, {22050, 16000},
		{8000, 16000}, {192000, 16000},
		{44056, 16000}, // an odd rate: interpolated filter table
		{16000, 48000}, {16000, 8000},
	} {
		in := rsSine(tc.from, 1000, amp, 1)
		out := rsResample(t, tc.from, tc.to, in)
		if want := (len(in)*tc.to + tc.from - 1) / tc.from; len(out) != want {
			t.Errorf("%d → %d: %d samples out of %d, want %d", tc.from, tc.to, len(out), len(in), want)
			continue
		}
		steady := rsSteady(out, tc.to)
		// A whole number of periods, so the DFT bins below do not leak.
		steady = steady[:len(steady)/(tc.to/1000)*(tc.to/1000)]

		if f := rsZeroCrossFreq(steady, tc.to); math.Abs(f-1000) > 1 {
			t.Errorf("%d → %d: tone at %.2f Hz, want 1000", tc.from, tc.to, f)
		}
		on := rsGoertzel(steady, tc.to, 1000)
		for _, off := range []float64{900, 1100} {
			if d := 10 * math.Log10(on/rsGoertzel(steady, tc.to, off)); d < 60 {
				t.Errorf("%d → %d: 1000 Hz only %.1f dB above %v Hz", tc.from, tc.to, d, off)
			}
		}
		if d := rsDB(rsRMS(steady) / (amp * 32767 / math.Sqrt2)); math.Abs(d) > 0.1 {
			t.Errorf("%d → %d: level changed by %.3f dB, want within ±0.1 dB", tc.from, tc.to, d)
		}
	}
}

// A tone above the output's Nyquist frequency must be filtered out, not
// folded back into the band (10 kHz at 48 kHz picked every third sample
// is a full-scale 6 kHz tone at 16 kHz).
func TestResamplerRejectsAliases(t *testing.T) {
	for _, tc := range []struct {
		from, to int
		freq     float64
	}{
		{48000, 16000, 10000}, {48000, 16000, 8500}, {48000, 16000, 20000},
		{44100, 16000, 10000}, {44100, 16000, 15000},
		{22050, 16000, 9000},
		{32000, 8000, 5000},
	} {
		in := rsSine(tc.from, tc.freq, 0.5, 1)
		out := rsSteady(rsResample(t, tc.from, tc.to, in), tc.to)
		if d := rsDB(rsRMS(out) / rsRMS(in)); d > -40 {
			t.Errorf("%v Hz at %d → %d: attenuated by only %.1f dB, want ≥ 40", tc.freq, tc.from, tc.to, -d)
		}
	}

	// The test itself can fail: decimation without a filter keeps the tone.
	in := rsSine(48000, 10000, 0.5, 1)
	naive := make([]int16, 0, len(in)/3)
	for i := 0; i < len(in); i += 3 {
		naive = append(naive, in[i])
	}
	if d := rsDB(rsRMS(naive) / rsRMS(in)); d < -3 {
		t.Fatalf("naive decimation attenuated the alias by %.1f dB; the check above proves nothing", -d)
	}
}

// Upsampling must not leave images of the input band above its Nyquist.
func TestResamplerRejectsImages(t *testing.T) {
	in := rsSine(8000, 1000, 0.5, 1)
	out := rsSteady(rsResample(t, 8000, 16000, in), 16000)
	out = out[:len(out)/16*16]
	if d := 10 * math.Log10(rsGoertzel(out, 16000, 1000)/rsGoertzel(out, 16000, 7000)); d < 60 {
		t.Errorf("image at 7 kHz only %.1f dB below the 1 kHz tone", d)
	}
}

func TestResamplerKeepsDC(t *testing.T) {
	in := make([]int16, 22050)
	for i := range in {
		in[i] = 12345
	}
	for _, s := range rsSteady(rsResample(t, 22050, 16000, in), 16000) {
		if s != 12345 {
			t.Fatalf("constant 12345 came out as %d", s)
		}
	}
}

func TestResamplerChunkedEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ from, to int }{
		{48000, 16000}, {44100, 16000}, {22050, 16000}, {32000, 16000}, {8000, 16000},
		{16000, 48000}, {16000, 8000}, {44056, 16000}, {16000, 16000},
	} {
		in := make([]int16, tc.from*7/10)
		for i := range in {
			in[i] = int16(rng.IntN(20000) - 10000)
		}
		whole := rsResample(t, tc.from, tc.to, in)

		r, err := NewResampler(tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		// Twice through the same Resampler: Flush must leave it fresh.
		for round := range 2 {
			var chunked []int16
			for rest := in; len(rest) > 0; {
				n := min(len(rest), rng.IntN(700))
				if rng.IntN(10) == 0 {
					n = min(len(rest), 1)
				}
				chunked = append(chunked, r.Process(rest[:n])...)
				rest = rest[n:]
			}
			chunked = append(chunked, r.Flush()...)
			if !slices.Equal(chunked, whole) {
				t.Errorf("%d → %d round %d: chunked output (%d samples) differs from whole (%d samples)",
					tc.from, tc.to, round, len(chunked), len(whole))
			}
		}
	}
}

// Resamplers for the same rates share one filter table; streams running
// side by side must not disturb each other.
func TestResamplerConcurrentStreams(t *testing.T) {
	in := rsSine(44100, 440, 0.3, 0.5)
	want := rsResample(t, 44100, 16000, in)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r, err := NewResampler(44100, 16000)
			if err != nil {
				t.Error(err)
				return
			}
			var got []int16
			for s := 0; s < len(in); s += 100 + g {
				got = append(got, r.Process(in[s:min(s+100+g, len(in))])...)
			}
			if got = append(got, r.Flush()...); !slices.Equal(got, want) {
				t.Errorf("stream %d differs from a lone one", g)
			}
		})
	}
	wg.Wait()
}

func TestResamplerLengths(t *testing.T) {
	for _, from := range []int{8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 96000, 192000} {
		for _, n := range []int{0, 1, 2, 3, 159, 160, 441, 16001} {
			out := rsResample(t, from, 16000, make([]int16, n))
			if want := (n*16000 + from - 1) / from; len(out) != want {
				t.Errorf("%d → 16000: %d samples gave %d, want %d", from, n, len(out), want)
			}
		}
	}
}

func TestResamplerPassThrough(t *testing.T) {
	r, err := NewResampler(16000, 16000)
	if err != nil {
		t.Fatal(err)
	}
	in := []int16{1, -2, 3, 32767, -32768}
	out := r.Process(in)
	if !slices.Equal(out, in) {
		t.Fatalf("pass-through gave %v, want %v", out, in)
	}
	in[0] = 99
	if out[0] != 1 {
		t.Error("pass-through output shares the caller's slice")
	}
	if tail := r.Flush(); len(tail) != 0 {
		t.Errorf("pass-through Flush = %v, want nothing", tail)
	}
}

func TestNewResamplerRejectsBadRates(t *testing.T) {
	for _, tc := range []struct{ from, to int }{
		{0, 16000}, {-48000, 16000}, {7999, 16000}, {192001, 16000}, {16000, 0}, {16000, 200000},
	} {
		if _, err := NewResampler(tc.from, tc.to); !errors.Is(err, ErrBadAudio) {
			t.Errorf("NewResampler(%d, %d) error = %v, want ErrBadAudio", tc.from, tc.to, err)
		}
	}
	for _, tc := range []struct{ from, to int }{{8000, 192000}, {192000, 8000}, {191999, 16000}} {
		if _, err := NewResampler(tc.from, tc.to); err != nil {
			t.Errorf("NewResampler(%d, %d): %v", tc.from, tc.to, err)
		}
	}
}

// BenchmarkResample48to16 measures the cost of converting one second of a
// 48 kHz stream (in 10 ms chunks, as a browser sends it) to 16 kHz.
func BenchmarkResample48to16(b *testing.B) { rsBench(b, 48000) }

// BenchmarkResample44to16 is the same for 44.1 kHz capture.
func BenchmarkResample44to16(b *testing.B) { rsBench(b, 44100) }

func rsBench(b *testing.B, from int) {
	rng := rand.New(rand.NewPCG(3, 4))
	in := make([]int16, from)
	for i := range in {
		in[i] = int16(rng.IntN(20000) - 10000)
	}
	r, err := NewResampler(from, 16000)
	if err != nil {
		b.Fatal(err)
	}
	chunk := from / 100
	b.ReportAllocs()
	b.ResetTimer()
	seconds := 0
	for b.Loop() {
		for s := 0; s < len(in); s += chunk {
			r.Process(in[s:min(s+chunk, len(in))])
		}
		r.Flush()
		seconds++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seconds), "ns/audio-s")
}
