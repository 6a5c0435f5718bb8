package realtime

import (
	"encoding/base64"
	"math"
	"math/rand/v2"
)

// rtaTone is ms milliseconds at rate of a voiced sound: a 150 Hz
// fundamental with its first harmonics, peak level dBFS.
func rtaTone(rate, ms int, dBFS float64) []int16 {
	n := rate * ms / 1000
	amp := 32767 * math.Pow(10, dBFS/20) / 1.75 // the harmonics' sum peaks near 1.75
	out := make([]int16, n)
	for i := range out {
		t := float64(i) / float64(rate)
		v := math.Sin(2*math.Pi*150*t) + 0.5*math.Sin(2*math.Pi*300*t) + 0.25*math.Sin(2*math.Pi*450*t)
		out[i] = int16(math.Round(amp * v))
	}
	return out
}

// rtaNoise is ms milliseconds at rate of white noise at an RMS level of
// dBFS, from a fixed seed.
func rtaNoise(rate, ms int, dBFS float64, seed uint64) []int16 {
	rng := rand.New(rand.NewPCG(seed, 1))
	rms := 32767 * math.Pow(10, dBFS/20)
	out := make([]int16, rate*ms/1000)
	for i := range out {
		out[i] = int16(max(-32768, min(32767, math.Round(rng.NormFloat64()*rms))))
	}
	return out
}

// rtaMix adds b onto a, in place (saturating), from offset.
func rtaMix(a, b []int16, offset int) []int16 {
	for i, v := range b {
		if j := offset + i; j < len(a) {
			a[j] = int16(max(-32768, min(32767, int32(a[j])+int32(v))))
		}
	}
	return a
}

// rtaChunks splits the encoded audio into base64 chunks of about ms
// milliseconds of the format.
func rtaChunks(f audioFormat, b []byte, ms int) []string {
	size := max(1, f.bytes(ms))
	var out []string
	for len(b) > 0 {
		n := min(size, len(b))
		out = append(out, base64.StdEncoding.EncodeToString(b[:n]))
		b = b[n:]
	}
	return out
}

// rtaGoertzel is the power of x at freq Hz (one DFT bin).
func rtaGoertzel(x []int16, rate int, freq float64) float64 {
	coef := 2 * math.Cos(2*math.Pi*freq/float64(rate))
	var s1, s2 float64
	for _, v := range x {
		s0 := float64(v) + coef*s1 - s2
		s2, s1 = s1, s0
	}
	return s1*s1 + s2*s2 - coef*s1*s2
}

// rtaDefaults are conversation.vad's defaults.
var rtaDefaults = VADDefaults{StartMillis: 100, HangMillis: 600, PreRollMillis: 200}
