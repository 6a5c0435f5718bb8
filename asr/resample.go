package asr

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// supportedRates are the rates a Resampler converts between, in Hz: the
// standard ones, from telephone audio to studio captures. Odd rates are
// refused rather than converted: a rate pair that reduces to a large ratio
// (44056 → 16000 is 2000:5507) needs a large filter table (over 1 MB, up to
// 4.9 MB near 192 kHz) that takes milliseconds to build, and a client
// declaring one odd rate after another could fill memory with them.
var supportedRates = [...]int{8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 88200, 96000, 176400, 192000}

// SupportedRates lists the sample rates NewResampler and CheckRate accept,
// in Hz, in increasing order. It is a copy for display: changing it changes
// nothing that is accepted.
var SupportedRates = slices.Clone(supportedRates[:])

// supportedRateList is the list for error messages.
var supportedRateList = func() string {
	parts := make([]string, len(supportedRates))
	for i, r := range supportedRates {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, ", ")
}()

// CheckRate returns nil for a supported sample rate and otherwise an error
// wrapping ErrBadAudio that names the rate and lists the supported ones, to
// answer a client's declaration with.
func CheckRate(rate int) error {
	if _, ok := slices.BinarySearch(supportedRates[:], rate); ok {
		return nil
	}
	return fmt.Errorf("%w: sample rate %d Hz is not supported; use one of %s Hz", ErrBadAudio, rate, supportedRateList)
}

// Filter design. The anti-aliasing filter is a Kaiser-windowed sinc whose
// cutoff (its -6 dB point) sits at 0.9 × the lower of the two Nyquist
// frequencies, with a transition band of ±0.1 × that Nyquist around it:
// flat (< 0.01 dB ripple) up to 0.8 × Nyquist (6.4 kHz for 16 kHz output)
// and at least resampleStopbandDB down from the Nyquist frequency on, so
// nothing above it folds back into the band.
const (
	resampleCutoff     = 0.9 // × lower Nyquist
	resampleTransition = 0.2 // × lower Nyquist, full width
	resampleStopbandDB = 80.0
)

// resampleMaxPhases bounds the coefficient table. Rate pairs whose ratio
// reduces to at most this many output phases per input sample (every pair
// to 16 kHz, and most others) get one exact row per phase; the few that
// reduce to more (11025 or 22050 up to 96 or 192 kHz: 1280 or 2560 phases)
// interpolate linearly between this many rows instead.
const resampleMaxPhases = 1024

// Resampler converts a continuous 16-bit mono stream from one sample rate
// to another with a windowed-sinc low-pass filter (a polyphase FIR), not by
// dropping or repeating samples. It keeps the input it still needs across
// calls, so a stream cut into chunks of any size resamples to exactly the
// samples it would give processed whole.
//
// Output sample n is the filtered input at time n/to seconds, so output and
// input stay aligned in time; the price is a latency of about half the
// filter (under 2.5 ms at 48 kHz → 16 kHz), which Flush releases at the
// end. A stream of N input samples gives ceil(N × to / from) output samples
// in all. A Resampler is not safe for concurrent use.
type Resampler struct {
	from, to int
	up, down int // to/from reduced: output phase steps per input sample
	*resampleFilter

	buf  []float64 // input samples from absolute index base on
	base int64
	in   int64 // input samples seen
	pos  int64 // integer part of the next output instant, in input samples
	frac int   // its fractional part, in 1/up of an input sample
}

// resampleFilter is the polyphase filter for one pair of rates. It is
// never modified once built, so Resamplers for the same rates share it.
type resampleFilter struct {
	half   int       // taps on each side of the output instant
	phases int       // rows in coef; == up when exact
	exact  bool      // one row per output phase, no interpolation
	coef   []float64 // (phases+1) rows of 2*half taps, each summing to 1
}

// resampleCache keeps every filter built, one per rate pair, so that one
// connection after another declaring 48 or 44.1 kHz does not rebuild its
// table (a millisecond and 180 kB for 44.1 kHz). It is bounded by
// construction: NewResampler refuses rates outside supportedRates before it
// gets here, so there are at most 13 × 12 = 156 pairs. The twelve pairs to
// 16 kHz, the only ones koe uses, take 1.0 MB in all; every pair of
// supported rates together would take 14.6 MB (the largest, 192000 →
// 11025, 1.04 MB). TestResamplerCacheBounded recomputes these figures.
var resampleCache struct {
	sync.Mutex
	entries map[[2]int]*resampleCacheEntry
}

// resampleCacheEntry builds its filter once, outside the cache lock, even
// when several streams ask for a new pair at the same time.
type resampleCacheEntry struct {
	once   sync.Once
	filter *resampleFilter
}

// NewResampler returns a Resampler from one rate to another, both among
// SupportedRates; other rates give CheckRate's error, which wraps
// ErrBadAudio (they usually come from a client's declaration). from == to
// is a pass-through.
func NewResampler(from, to int) (*Resampler, error) {
	for _, r := range []int{from, to} {
		if err := CheckRate(r); err != nil {
			return nil, err
		}
	}
	r := &Resampler{from: from, to: to}
	if from == to {
		return r, nil
	}
	g := resampleGCD(from, to)
	r.up, r.down = to/g, from/g
	r.resampleFilter = resampleFilterFor(from, to, r.up)
	r.reset()
	return r, nil
}

func resampleFilterFor(from, to, up int) *resampleFilter {
	key := [2]int{from, to}
	resampleCache.Lock()
	e := resampleCache.entries[key]
	if e == nil {
		if resampleCache.entries == nil {
			resampleCache.entries = make(map[[2]int]*resampleCacheEntry)
		}
		e = &resampleCacheEntry{}
		resampleCache.entries[key] = e
	}
	resampleCache.Unlock()
	e.once.Do(func() { e.filter = newResampleFilter(from, to, up) })
	return e.filter
}

func newResampleFilter(from, to, up int) *resampleFilter {
	f := &resampleFilter{}
	// Everything below is in input samples: c is the cutoff in cycles per
	// input sample, width the transition band in the same unit.
	lowNyquist := float64(min(from, to)) / 2
	c := resampleCutoff * lowNyquist / float64(from)
	width := resampleTransition * lowNyquist / float64(from)
	// Kaiser's estimates: the length that reaches the stopband attenuation
	// over that transition, and the window shape that gives it.
	taps := (resampleStopbandDB-7.95)/(14.36*width) + 1
	f.half = int(math.Ceil(taps / 2))
	beta := 0.1102 * (resampleStopbandDB - 8.7)

	f.phases, f.exact = up, true
	if up > resampleMaxPhases {
		f.phases, f.exact = resampleMaxPhases, false
	}
	n := 2 * f.half
	f.coef = make([]float64, (f.phases+1)*n)
	i0beta := resampleBesselI0(beta)
	for p := 0; p <= f.phases; p++ {
		// Row p is for output instants p/phases of an input sample past
		// an input sample; its tap k weighs input sample k-half+1 counted
		// from there, at distance t.
		off := float64(p) / float64(f.phases)
		row := f.coef[p*n : (p+1)*n]
		var sum float64
		for k := range row {
			t := off - float64(k-f.half+1)
			x := t / float64(f.half)
			w := resampleBesselI0(beta*math.Sqrt(max(0, 1-x*x))) / i0beta
			row[k] = 2 * c * resampleSinc(2*c*t) * w
			sum += row[k]
		}
		// Unity gain at DC for every phase, so a constant input stays
		// exactly constant whatever the instant.
		for k := range row {
			row[k] /= sum
		}
	}
	return f
}

// reset starts a new stream: half-1 zeros stand for the silence before the
// first sample, which the first outputs' filters reach into.
func (r *Resampler) reset() {
	r.buf = append(r.buf[:0], make([]float64, r.half-1)...)
	r.base = -int64(r.half - 1)
	r.in, r.pos, r.frac = 0, 0, 0
}

// Process takes the next chunk of the stream and returns the output
// samples that are complete; in is neither kept nor modified.
func (r *Resampler) Process(in []int16) []int16 {
	if r.from == r.to {
		return slices.Clone(in)
	}
	for _, s := range in {
		r.buf = append(r.buf, float64(s))
	}
	r.in += int64(len(in))
	out := make([]int16, 0, len(in)*r.up/r.down+1)
	// An output needs input up to pos+half.
	out = r.emit(out, func() bool { return r.pos+int64(r.half) < r.in })
	// Drop what no later output reaches back to.
	if drop := int(r.pos - int64(r.half) + 1 - r.base); drop > 0 {
		r.buf = r.buf[:copy(r.buf, r.buf[drop:])]
		r.base += int64(drop)
	}
	return out
}

// Flush ends the stream: it returns the last samples, which the filter
// held back waiting for input that will not come (silence is assumed after
// the end), and readies the Resampler for a new stream.
func (r *Resampler) Flush() []int16 {
	if r.from == r.to {
		return nil
	}
	r.buf = append(r.buf, make([]float64, r.half)...)
	out := r.emit(nil, func() bool { return r.pos < r.in })
	r.reset()
	return out
}

// emit appends output samples while more says the next one is due.
func (r *Resampler) emit(out []int16, more func() bool) []int16 {
	n := 2 * r.half
	for more() {
		start := int(r.pos - int64(r.half) + 1 - r.base)
		x := r.buf[start : start+n]
		var acc float64
		if r.exact {
			acc = resampleDot(r.coef[r.frac*n:(r.frac+1)*n], x)
		} else {
			// The instant falls between two rows of the table.
			scaled := int64(r.frac) * int64(r.phases)
			p := int(scaled / int64(r.up))
			mu := float64(scaled%int64(r.up)) / float64(r.up)
			r0 := r.coef[p*n : (p+1)*n]
			r1 := r.coef[(p+1)*n : (p+2)*n]
			for k, c := range r0 {
				acc += (c + mu*(r1[k]-c)) * x[k]
			}
		}
		// The filter rings past full scale on clipped input; saturate.
		out = append(out, int16(max(math.MinInt16, min(math.MaxInt16, math.Round(acc)))))
		r.frac += r.down
		r.pos += int64(r.frac / r.up)
		r.frac %= r.up
	}
	return out
}

// resampleDot is the dot product of c and x[:len(c)], over four
// independent sums so that the additions do not wait on each other.
func resampleDot(c, x []float64) float64 {
	x = x[:len(c)]
	var a0, a1, a2, a3 float64
	k := 0
	for ; k+4 <= len(c); k += 4 {
		a0 += c[k] * x[k]
		a1 += c[k+1] * x[k+1]
		a2 += c[k+2] * x[k+2]
		a3 += c[k+3] * x[k+3]
	}
	for ; k < len(c); k++ {
		a0 += c[k] * x[k]
	}
	return (a0 + a1) + (a2 + a3)
}

func resampleSinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	return math.Sin(math.Pi*x) / (math.Pi * x)
}

// resampleBesselI0 is the modified Bessel function of the first kind, order
// zero, by its power series (it converges fast for the window's arguments).
func resampleBesselI0(x float64) float64 {
	sum, term := 1.0, 1.0
	q := x * x / 4
	for k := 1; term > sum*1e-17; k++ {
		term *= q / float64(k*k)
		sum += term
	}
	return sum
}

func resampleGCD(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
