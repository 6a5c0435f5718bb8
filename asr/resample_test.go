package asr

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
		{8000, 16000}, {11025, 16000}, {12000, 16000}, {22050, 16000}, {24000, 16000},
		{32000, 16000}, {44100, 16000}, {48000, 16000}, {88200, 16000}, {96000, 16000},
		{176400, 16000}, {192000, 16000},
		{11025, 96000}, {22050, 192000}, // 1280 phases: interpolated filter table
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
		{16000, 48000}, {16000, 8000}, {11025, 192000}, {16000, 16000},
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
		{44056, 16000}, {191999, 16000}, {47999, 16000}, {16000, 44101}, {64000, 16000},
	} {
		if _, err := NewResampler(tc.from, tc.to); !errors.Is(err, ErrBadAudio) {
			t.Errorf("NewResampler(%d, %d) error = %v, want ErrBadAudio", tc.from, tc.to, err)
		}
	}
	for _, tc := range []struct{ from, to int }{{8000, 192000}, {192000, 8000}, {176400, 16000}, {11025, 12000}} {
		if _, err := NewResampler(tc.from, tc.to); err != nil {
			t.Errorf("NewResampler(%d, %d): %v", tc.from, tc.to, err)
		}
	}
}

func TestCheckRate(t *testing.T) {
	want := []int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000, 176400, 192000}
	if !slices.Equal(SupportedRates, want) {
		t.Fatalf("SupportedRates = %v, want %v", SupportedRates, want)
	}
	for _, r := range SupportedRates {
		if err := CheckRate(r); err != nil {
			t.Errorf("CheckRate(%d) = %v", r, err)
		}
	}
	for _, r := range []int{0, -16000, 1, 7999, 8001, 16001, 44056, 44099, 47999, 64000, 192001, 1 << 40} {
		err := CheckRate(r)
		if !errors.Is(err, ErrBadAudio) {
			t.Errorf("CheckRate(%d) = %v, want ErrBadAudio", r, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, fmt.Sprintf("%d Hz", r)) {
			t.Errorf("CheckRate(%d): %q does not name the rate", r, msg)
		}
		for _, s := range SupportedRates {
			if !strings.Contains(msg, strconv.Itoa(s)) {
				t.Errorf("CheckRate(%d): %q does not list %d", r, msg, s)
			}
		}
	}
	// The exported list is for display: changing it accepts nothing new.
	saved := SupportedRates[0]
	SupportedRates[0] = 44056
	defer func() { SupportedRates[0] = saved }()
	if CheckRate(44056) == nil || CheckRate(8000) != nil {
		t.Error("CheckRate follows changes to SupportedRates")
	}
}

// resampleCacheReset empties the filter cache, for tests that count it.
func resampleCacheReset() {
	resampleCache.Lock()
	defer resampleCache.Unlock()
	resampleCache.entries = nil
}

// resampleCacheSnapshot returns the cached pairs and the bytes of their
// tables.
func resampleCacheSnapshot() (pairs [][2]int, bytes int) {
	resampleCache.Lock()
	defer resampleCache.Unlock()
	for k, e := range resampleCache.entries {
		pairs = append(pairs, k)
		if e.filter != nil {
			bytes += 8 * len(e.filter.coef)
		}
	}
	return pairs, bytes
}

// TestResamplerCacheBounded is a client declaring one rate after another:
// every supported rate and many odd ones. The odd ones are refused before
// any filter is built, so the cache holds one table per supported rate and
// the storm allocates next to nothing; the cache's worst case, every pair
// of supported rates, stays within the bound resample.go documents.
func TestResamplerCacheBounded(t *testing.T) {
	resampleCacheReset()
	t.Cleanup(resampleCacheReset)
	var odd []int
	for r := 8001; len(odd) < 300; r += 613 { // 8001 … 191,888 Hz, none standard
		odd = append(odd, r)
	}
	odd = append(odd, 44056, 0, -1, 7999, 192001, 1<<31)

	for _, r := range SupportedRates {
		if _, err := NewResampler(r, SampleRate); err != nil {
			t.Fatalf("NewResampler(%d, %d): %v", r, SampleRate, err)
		}
	}
	pairs, warm := resampleCacheSnapshot()
	if len(pairs) != len(SupportedRates)-1 {
		t.Errorf("%d filters cached for %d rates to 16 kHz: %v", len(pairs), len(SupportedRates)-1, pairs)
	}
	if warm > 1100<<10 {
		t.Errorf("the filters to 16 kHz take %d bytes, more than the 1.0 MB documented", warm)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, r := range odd {
		_, err := NewResampler(r, SampleRate)
		if !errors.Is(err, ErrBadAudio) || !strings.Contains(err.Error(), "not supported") || !strings.Contains(err.Error(), "44100, 48000") {
			t.Fatalf("NewResampler(%d, 16000) error = %v, want ErrBadAudio listing the supported rates", r, err)
		}
		// Known rates in between keep working from the cache.
		if _, err := NewResampler(SupportedRates[r&7], SampleRate); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// An odd rate used to build a table of 1.1–4.9 MB; a refusal is an
	// error message of a couple of hundred bytes.
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("%d refused rates allocated %d bytes", len(odd), grown)
	}
	if pairs, bytes := resampleCacheSnapshot(); len(pairs) != len(SupportedRates)-1 || bytes != warm {
		t.Errorf("after the storm: %d filters, %d bytes; want the %d filters and %d bytes from before", len(pairs), bytes, len(SupportedRates)-1, warm)
	}

	// The worst case: every pair of supported rates, in both directions.
	for _, from := range SupportedRates {
		for _, to := range SupportedRates {
			if _, err := NewResampler(from, to); err != nil {
				t.Fatalf("NewResampler(%d, %d): %v", from, to, err)
			}
		}
	}
	n := len(SupportedRates)
	pairs, all := resampleCacheSnapshot()
	if len(pairs) != n*(n-1) || all > 15<<20 {
		t.Errorf("every pair: %d filters, %d bytes; want %d filters within the 14.6 MB documented", len(pairs), all, n*(n-1))
	}
	t.Logf("cache: %d bytes for the pairs to 16 kHz, %d bytes for all %d pairs", warm, all, len(pairs))
}

// BenchmarkResampleFilter measures building the filter table for each
// supported rate to 16 kHz (what the first stream at that rate pays), and
// reports the table's size.
func BenchmarkResampleFilter(b *testing.B) {
	for _, from := range SupportedRates {
		if from == SampleRate {
			continue
		}
		b.Run(strconv.Itoa(from), func(b *testing.B) {
			up := SampleRate / resampleGCD(from, SampleRate)
			var f *resampleFilter
			for b.Loop() {
				f = newResampleFilter(from, SampleRate, up)
			}
			b.ReportMetric(float64(8*len(f.coef)), "table-bytes")
		})
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
