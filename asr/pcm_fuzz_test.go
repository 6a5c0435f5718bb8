package asr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// FuzzPCM16FromBytes checks the binary-frame decoder on any payload: an odd
// byte count is refused with ErrBadAudio naming it; otherwise every pair of
// bytes is one little-endian sample, and encoding them gives the bytes back.
func FuzzPCM16FromBytes(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x01})
	f.Add([]byte{0x01, 0x00, 0xff, 0xff, 0x00, 0x80, 0xff, 0x7f})
	f.Add([]byte{0x00, 0x80, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		samples, err := PCM16FromBytes(b)
		if len(b)%2 == 1 {
			if !errors.Is(err, ErrBadAudio) || samples != nil || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes", len(b))) {
				t.Fatalf("%d bytes: %d samples, error %v; want ErrBadAudio naming the count", len(b), len(samples), err)
			}
			return
		}
		if err != nil || len(samples) != len(b)/2 {
			t.Fatalf("%d bytes: %d samples, error %v", len(b), len(samples), err)
		}
		back := make([]byte, 0, len(b))
		for i, s := range samples {
			if want := int16(uint16(b[2*i]) | uint16(b[2*i+1])<<8); s != want {
				t.Fatalf("sample %d = %d, want %d", i, s, want)
			}
			back = binary.LittleEndian.AppendUint16(back, uint16(s))
		}
		if string(back) != string(b) {
			t.Fatal("the samples do not encode back to the payload")
		}
	})
}

// FuzzFloatsToPCM16 checks the float sample validation on any values, read
// as raw float64 bits so that NaNs, infinities, subnormals and huge values
// all come up: the first sample that is not finite or lies past full scale
// by more than the tolerance is refused, by index, with ErrBadAudio;
// otherwise every sample becomes the nearest 16-bit value, full scale
// clamped.
func FuzzFloatsToPCM16(f *testing.F) {
	floats := func(vs ...float64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	f.Add(floats())
	f.Add(floats(0, 0.5, -0.5, 1, -1, 1.005, -1.01, 1.0/32767))
	f.Add(floats(0.1, math.NaN()))
	f.Add(floats(math.Inf(1), 0))
	f.Add(floats(0, math.Inf(-1)))
	f.Add(floats(1e308, -1e308, math.MaxFloat64))
	f.Add(floats(math.SmallestNonzeroFloat64, math.Copysign(0, -1), 1.0100001))
	f.Add(append(floats(0.25), 1, 2, 3)) // a trailing partial value is ignored
	f.Fuzz(func(t *testing.T, b []byte) {
		in := make([]float64, len(b)/8)
		for i := range in {
			in[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
		out, err := FloatsToPCM16(in)

		bad := -1
		for i, v := range in {
			if !(v >= -1-pcmTolerance && v <= 1+pcmTolerance) { // NaN fails both
				bad = i
				break
			}
		}
		if bad >= 0 {
			if !errors.Is(err, ErrBadAudio) || out != nil || !strings.Contains(err.Error(), fmt.Sprintf("sample %d ", bad)) {
				t.Fatalf("sample %d is %v: got %d samples, error %v; want ErrBadAudio naming it", bad, in[bad], len(out), err)
			}
			return
		}
		if err != nil || len(out) != len(in) {
			t.Fatalf("%d valid samples: %d out, error %v", len(in), len(out), err)
		}
		for i, v := range in {
			exact := max(-1, min(1, v)) * 32767
			if d := float64(out[i]) - exact; d < -0.5 || d > 0.5 {
				t.Fatalf("sample %d: %v became %d, want the nearest to %v", i, v, out[i], exact)
			}
		}
	})
}
