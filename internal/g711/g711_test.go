package g711

import (
	"math"
	"testing"
)

// The ITU-T G.711 segment boundaries, in the laws' own linear units:
// µ-law's decision values 31, 95, 223, … (14-bit magnitudes; the bias of 33
// puts them there) begin segments 1, 2, 3, …; A-law's segments 1 to 7
// begin at the powers of two 32 to 2048 (12-bit magnitudes).
var (
	ulawSegmentStarts = []int32{31, 95, 223, 479, 991, 2015, 4063}
	alawSegmentStarts = []int32{32, 64, 128, 256, 512, 1024, 2048}
)

func TestSegmentBoundaries(t *testing.T) {
	for i, start := range ulawSegmentStarts {
		// 16-bit samples are the 14-bit ones × 4.
		last, first := int16(4*start-1), int16(4*start)
		if got := ulawSegment(EncodeULaw(last)); got != i {
			t.Errorf("µ-law: %d is in segment %d, want %d", last, got, i)
		}
		if got := ulawSegment(EncodeULaw(first)); got != i+1 {
			t.Errorf("µ-law: %d is in segment %d, want %d", first, got, i+1)
		}
		if got := ulawSegment(EncodeULaw(-first)); got != i+1 {
			t.Errorf("µ-law: %d is in segment %d, want %d", -first, got, i+1)
		}
	}
	for i, start := range alawSegmentStarts {
		// 16-bit samples are the 12-bit magnitudes × 8.
		last, first := int16(8*start-1), int16(8*start)
		if got := alawSegment(EncodeALaw(last)); got != i {
			t.Errorf("A-law: %d is in segment %d, want %d", last, got, i)
		}
		if got := alawSegment(EncodeALaw(first)); got != i+1 {
			t.Errorf("A-law: %d is in segment %d, want %d", first, got, i+1)
		}
	}
}

func ulawSegment(c byte) int { return int(^c>>4) & 7 }
func alawSegment(c byte) int { return int((c^alawXOR)>>4) & 7 }

// TestKnownCodes checks codes every implementation agrees on: silence,
// the ends of the scale, and the smallest steps.
func TestKnownCodes(t *testing.T) {
	for _, c := range []struct {
		law    string
		sample int16
		code   byte
		back   int16
	}{
		{"µ", 0, 0xFF, 0},
		{"µ", 32767, 0x80, 32124},
		{"µ", -32768, 0x00, -32124},
		{"µ", 8, 0xFE, 8},
		{"µ", -8, 0x7E, -8},
		{"A", 0, 0xD5, 8},
		{"A", -1, 0x55, -8},
		{"A", 32767, 0xAA, 32256},
		{"A", -32768, 0x2A, -32256},
	} {
		enc, dec := EncodeULaw, DecodeULaw
		if c.law == "A" {
			enc, dec = EncodeALaw, DecodeALaw
		}
		if got := enc(c.sample); got != c.code {
			t.Errorf("%s-law encode(%d) = %#02x, want %#02x", c.law, c.sample, got, c.code)
		}
		if got := dec(c.code); got != c.back {
			t.Errorf("%s-law decode(%#02x) = %d, want %d", c.law, c.code, got, c.back)
		}
	}
}

// TestDigitalMilliwatt encodes the 1 kHz sine at 0 dBm0 that G.711 gives as
// its digital milliwatt: 8 samples a period at phases π/8 + kπ/4, which
// must code to the sequences of its tables 5 and 6. 0 dBm0 lies 3.17 dB
// (µ-law) and 3.14 dB (A-law) below the codec's overload point (8159 in
// 14 bits, 4096 in 13).
func TestDigitalMilliwatt(t *testing.T) {
	for _, c := range []struct {
		law  string
		peak float64
		enc  func(int16) byte
		want []byte
	}{
		{"µ", 4 * 8159 / math.Pow(10, 3.17/20), EncodeULaw, []byte{0x1E, 0x0B, 0x0B, 0x1E, 0x9E, 0x8B, 0x8B, 0x9E}},
		{"A", 8 * 4096 / math.Pow(10, 3.14/20), EncodeALaw, []byte{0x34, 0x21, 0x21, 0x34, 0xB4, 0xA1, 0xA1, 0xB4}},
	} {
		for k, want := range c.want {
			s := int16(math.Round(-c.peak * math.Sin(math.Pi/8+float64(k)*math.Pi/4)))
			if got := c.enc(s); got != want {
				t.Errorf("%s-law milliwatt sample %d (%d) = %#02x, want %#02x", c.law, k, s, got, want)
			}
		}
	}
}

// TestRoundTrips checks every code and every sample: a code decodes to a
// sample that encodes to it again (µ-law's negative zero aside), and a
// sample decodes back to the middle of its step, never further than half
// a step away (the step of its segment; the last step of each law is
// clipped instead).
func TestRoundTrips(t *testing.T) {
	for c := range 256 {
		if got := EncodeULaw(DecodeULaw(byte(c))); got != byte(c) && c != 0x7F {
			t.Errorf("µ-law %#02x decodes to %d, which encodes as %#02x", c, DecodeULaw(byte(c)), got)
		}
		if got := EncodeALaw(DecodeALaw(byte(c))); got != byte(c) {
			t.Errorf("A-law %#02x decodes to %d, which encodes as %#02x", c, DecodeALaw(byte(c)), got)
		}
	}
	for s := math.MinInt16; s <= math.MaxInt16; s++ {
		x := int16(s)
		u := int(DecodeULaw(EncodeULaw(x)))
		step := 8 << ulawSegment(EncodeULaw(x)) // 2 in 14 bits, doubling
		if d := abs(u - s); d > step/2 && abs(s) <= 32124 {
			t.Fatalf("µ-law: %d comes back as %d, %d away (step %d)", s, u, d, step)
		}
		a := int(DecodeALaw(EncodeALaw(x)))
		seg := alawSegment(EncodeALaw(x))
		astep := 16 << max(0, seg-1)
		if d := abs(a - s); d > astep/2 && abs(s) <= 32256 {
			t.Fatalf("A-law: %d comes back as %d, %d away (step %d)", s, a, d, astep)
		}
		// The laws are monotonic: a louder sample never gets a quieter code.
		if s > math.MinInt16 {
			if DecodeULaw(EncodeULaw(x-1)) > int16(u) || DecodeALaw(EncodeALaw(x-1)) > int16(a) {
				t.Fatalf("not monotonic at %d", s)
			}
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestAppend(t *testing.T) {
	samples := []int16{0, 1000, -1000, 32767, -32768}
	u := AppendULaw([]byte{9}, samples)
	a := AppendALaw(nil, samples)
	if len(u) != 6 || u[0] != 9 || len(a) != 5 {
		t.Fatalf("append: %x %x", u, a)
	}
	us := AppendULawSamples(nil, u[1:])
	as := AppendALawSamples(nil, a)
	for i, s := range samples {
		if us[i] != DecodeULaw(EncodeULaw(s)) || as[i] != DecodeALaw(EncodeALaw(s)) {
			t.Fatalf("sample %d: %d, %d", i, us[i], as[i])
		}
	}
}

// FuzzDecode checks that any bytes decode, one sample each, to samples
// that encode back to the same bytes (but µ-law's negative zero).
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00, 0x7F, 0x80, 0xFF, 0x55, 0xD5})
	f.Fuzz(func(t *testing.T, b []byte) {
		u := AppendULawSamples(nil, b)
		a := AppendALawSamples(nil, b)
		if len(u) != len(b) || len(a) != len(b) {
			t.Fatalf("%d bytes gave %d and %d samples", len(b), len(u), len(a))
		}
		ub, ab := AppendULaw(nil, u), AppendALaw(nil, a)
		for i, c := range b {
			if ub[i] != c && !(c == 0x7F && ub[i] == 0xFF) {
				t.Fatalf("µ-law byte %d: %#02x came back as %#02x", i, c, ub[i])
			}
			if ab[i] != c {
				t.Fatalf("A-law byte %d: %#02x came back as %#02x", i, c, ab[i])
			}
		}
	})
}

// One second of 8 kHz audio each way.
func BenchmarkULaw(b *testing.B) { benchLaw(b, AppendULaw, AppendULawSamples) }
func BenchmarkALaw(b *testing.B) { benchLaw(b, AppendALaw, AppendALawSamples) }

func benchLaw(b *testing.B, enc func([]byte, []int16) []byte, dec func([]int16, []byte) []int16) {
	samples := make([]int16, 8000)
	for i := range samples {
		samples[i] = int16(12000 * math.Sin(2*math.Pi*440*float64(i)/8000))
	}
	codes := make([]byte, 0, len(samples))
	back := make([]int16, 0, len(samples))
	b.SetBytes(int64(len(samples)))
	b.ReportAllocs()
	for b.Loop() {
		codes = enc(codes[:0], samples)
		back = dec(back[:0], codes)
	}
}
