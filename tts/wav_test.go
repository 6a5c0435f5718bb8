package tts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"koe/internal/wavio"
)

func TestNormalizeIntegerWidths(t *testing.T) {
	src := ramp(1001)
	src[0], src[1] = math.MinInt16, math.MaxInt16
	for _, bits := range []int{8, 16, 24, 32} {
		data := wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 16000, bits), chunk{id: "data", body: pcmBytes(src, bits)})
		a, err := Normalize(data)
		if err != nil {
			t.Fatalf("%d-bit: %v", bits, err)
		}
		checkWAV(t, a)
		if a.SampleRate != 16000 || len(a.Samples) != len(src) {
			t.Fatalf("%d-bit: rate %d, %d samples", bits, a.SampleRate, len(a.Samples))
		}
		for i, s := range src {
			want := s
			if bits == 8 {
				want = s >> 8 << 8 // 8-bit keeps only the top byte
			}
			if a.Samples[i] != want {
				t.Fatalf("%d-bit sample %d = %d, want %d", bits, i, a.Samples[i], want)
			}
		}
	}
}

func TestNormalizeFloat(t *testing.T) {
	src := ramp(500)
	values := make([]float64, len(src))
	for i, s := range src {
		values[i] = float64(s) / 32767
	}
	// Out-of-range and NaN samples clamp instead of wrapping around.
	values = append(values, 1.5, -7, math.NaN(), math.Inf(1))
	for _, bits := range []int{32, 64} {
		a, err := Normalize(wavBytes(nil, fmtChunk(wavio.FormatFloat, 1, 48000, bits), chunk{id: "data", body: floatBytes(values, bits)}))
		if err != nil {
			t.Fatalf("float%d: %v", bits, err)
		}
		checkWAV(t, a)
		for i, s := range src {
			want := max(s, -32767) // float full scale is symmetric
			if d := int(a.Samples[i]) - int(want); d < -1 || d > 1 {
				t.Fatalf("float%d sample %d = %d, want %d", bits, i, a.Samples[i], want)
			}
		}
		tail := a.Samples[len(src):]
		if tail[0] != 32767 || tail[1] != -32767 || tail[2] != 0 || tail[3] != 32767 {
			t.Errorf("float%d clamping: %v", bits, tail)
		}
	}
}

func TestNormalizeExtensible(t *testing.T) {
	src := ramp(300)
	// 24-bit samples in an extensible fmt chunk, as many DAWs write them.
	a, err := Normalize(wavBytes(nil, extensibleFmt(wavio.FormatPCM, 1, 44100, 24, 24), chunk{id: "data", body: pcmBytes(src, 24)}))
	if err != nil {
		t.Fatal(err)
	}
	checkWAV(t, a)
	if !equalInt16(a.Samples, src) {
		t.Error("extensible 24-bit PCM changed the samples")
	}
	values := []float64{0.5, -0.5, 0.25}
	a, err = Normalize(wavBytes(nil, extensibleFmt(wavio.FormatFloat, 1, 44100, 32, 32), chunk{id: "data", body: floatBytes(values, 32)}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int16{16384, -16384, 8192}; !equalInt16(a.Samples, want) {
		t.Errorf("extensible float = %v, want %v", a.Samples, want)
	}
}

func TestNormalizeDownmix(t *testing.T) {
	// Stereo: left and right average; opposite signals cancel.
	var stereo []int16
	for i := range 200 {
		l := int16(i * 100)
		stereo = append(stereo, l, int16(-i*50))
	}
	a, err := Normalize(wavBytes(nil, fmtChunk(wavio.FormatPCM, 2, 22050, 16), chunk{id: "data", body: pcmBytes(stereo, 16)}))
	if err != nil {
		t.Fatal(err)
	}
	checkWAV(t, a)
	if len(a.Samples) != 200 {
		t.Fatalf("%d samples, want 200 frames", len(a.Samples))
	}
	for i, s := range a.Samples {
		if want := int16(i * 25); s != want {
			t.Fatalf("frame %d = %d, want %d", i, s, want)
		}
	}
	// Full-scale channels in agreement stay full scale (no overflow).
	a, err = Normalize(wavBytes(nil, fmtChunk(wavio.FormatPCM, 2, 8000, 32), chunk{id: "data", body: pcmBytes([]int16{32767, 32767, -32768, -32768}, 32)}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int16{32767, -32768}; !equalInt16(a.Samples, want) {
		t.Errorf("32-bit stereo = %v, want %v", a.Samples, want)
	}
	// Six channels of float.
	six := floatBytes([]float64{0.6, 0.6, 0, 0, 0, 0}, 32)
	a, err = Normalize(wavBytes(nil, fmtChunk(wavio.FormatFloat, 6, 48000, 32), chunk{id: "data", body: six}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int16{6553}; !equalInt16(a.Samples, want) { // (0.6 + 0.6) / 6 channels
		t.Errorf("5.1 float = %v, want %v", a.Samples, want)
	}
}

func TestNormalizePlaceholderSizes(t *testing.T) {
	// What espeak-ng --stdout writes: it cannot seek back, so both sizes
	// are near-2^31 placeholders.
	src := ramp(2205)
	data := wavBytes(u32(0x7ffff024), fmtChunk(wavio.FormatPCM, 1, 22050, 16), chunk{id: "data", body: pcmBytes(src, 16), size: u32(0x7ffff000)})
	a, err := Normalize(data)
	if err != nil {
		t.Fatal(err)
	}
	checkWAV(t, a)
	if !equalInt16(a.Samples, src) || a.Duration != 100*time.Millisecond {
		t.Errorf("%d samples, %v", len(a.Samples), a.Duration)
	}
	// Other streaming writers use 0xFFFFFFFF.
	data = wavBytes(u32(math.MaxUint32), fmtChunk(wavio.FormatPCM, 1, 22050, 16), chunk{id: "data", body: pcmBytes(src, 16), size: u32(math.MaxUint32)})
	if a, err = Normalize(data); err != nil || !equalInt16(a.Samples, src) {
		t.Errorf("0xFFFFFFFF sizes: %v, %d samples", err, len(a.Samples))
	}
	// RF64 keeps the real sizes in ds64 and placeholders everywhere else.
	rf64 := wavBytes(u32(math.MaxUint32), chunk{id: "ds64", body: make([]byte, 28)}, fmtChunk(wavio.FormatPCM, 1, 22050, 16), chunk{id: "data", body: pcmBytes(src, 16), size: u32(math.MaxUint32)})
	copy(rf64, "RF64")
	if a, err = Normalize(rf64); err != nil || !equalInt16(a.Samples, src) {
		t.Errorf("RF64: %v, %d samples", err, len(a.Samples))
	}
}

func TestNormalizeExtraChunks(t *testing.T) {
	src := ramp(100)
	list := chunk{id: "LIST", body: append([]byte("INFOISFT"), []byte{6, 0, 0, 0, 'k', 'o', 'e', 0, 0, 0}...)}
	fact := chunk{id: "fact", body: []byte{100, 0, 0, 0}}
	odd := chunk{id: "junk", body: []byte{1, 2, 3}} // odd size, padded
	cases := map[string][]byte{
		"LIST and fact before data": wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 16000, 16), list, fact, odd, chunk{id: "data", body: pcmBytes(src, 16)}),
		"LIST before fmt":           wavBytes(nil, list, fmtChunk(wavio.FormatPCM, 1, 16000, 16), chunk{id: "data", body: pcmBytes(src, 16)}),
		"LIST after data":           wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 16000, 16), chunk{id: "data", body: pcmBytes(src, 16)}, list),
		"fmt after data":            wavBytes(nil, chunk{id: "data", body: pcmBytes(src, 16)}, fmtChunk(wavio.FormatPCM, 1, 16000, 16)),
		"missing pad byte":          wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 16000, 16), chunk{id: "junk", body: []byte{1, 2, 3}, noPad: true}, chunk{id: "data", body: pcmBytes(src, 16)}),
		"long fmt chunk":            wavBytes(nil, chunk{id: "fmt ", body: append(fmtChunk(wavio.FormatPCM, 1, 16000, 16).body, 0, 0)}, chunk{id: "data", body: pcmBytes(src, 16)}),
	}
	for name, data := range cases {
		a, err := Normalize(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		checkWAV(t, a)
		if !equalInt16(a.Samples, src) || a.SampleRate != 16000 {
			t.Errorf("%s: %d samples at %d Hz", name, len(a.Samples), a.SampleRate)
		}
	}
}

func TestNormalizeTruncated(t *testing.T) {
	src := ramp(100)
	full := wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 16000, 16), chunk{id: "data", body: pcmBytes(src, 16)})
	// Cut mid-sample: the size promises 200 bytes, 151 arrive.
	a, err := Normalize(full[:44+151])
	if err != nil {
		t.Fatal(err)
	}
	checkWAV(t, a)
	if !equalInt16(a.Samples, src[:75]) {
		t.Errorf("truncated: %d samples, want the 75 whole ones", len(a.Samples))
	}
	// Stereo cut mid-frame keeps whole frames only.
	stereo := wavBytes(nil, fmtChunk(wavio.FormatPCM, 2, 16000, 24), chunk{id: "data", body: pcmBytes(src, 24)})
	a, err = Normalize(stereo[:44+6*10+4])
	if err != nil || len(a.Samples) != 10 {
		t.Errorf("stereo 24-bit cut mid-frame: %v, %d samples, want 10", err, len(a.Samples))
	}
	// An odd data size (a correct one) drops the odd byte.
	odd := wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 16000, 16), chunk{id: "data", body: append(pcmBytes(src[:3], 16), 0x7f)})
	a, err = Normalize(odd)
	if err != nil || !equalInt16(a.Samples, src[:3]) {
		t.Errorf("odd data size: %v, %v", err, a.Samples)
	}
}

func TestNormalizeEmpty(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty data chunk":        wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 22050, 16), chunk{id: "data"}),
		"placeholder, no samples": wavBytes(u32(0x7ffff024), fmtChunk(wavio.FormatPCM, 1, 22050, 16), chunk{id: "data", size: u32(0x7ffff000)}),
		"less than a frame":       wavBytes(nil, fmtChunk(wavio.FormatPCM, 2, 22050, 16), chunk{id: "data", body: []byte{1, 2, 3}}),
		"float, no samples":       wavBytes(nil, fmtChunk(wavio.FormatFloat, 1, 22050, 32), chunk{id: "data"}),
	} {
		a, err := Normalize(data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		checkWAV(t, a)
		if len(a.Samples) != 0 || a.Duration != 0 || len(a.WAV) != 44 || a.SampleRate != 22050 {
			t.Errorf("%s: %d samples, %v, %d bytes, %d Hz", name, len(a.Samples), a.Duration, len(a.WAV), a.SampleRate)
		}
		if v := Volumes(a.Samples, a.SampleRate, 20); v == nil || len(v) != 0 {
			t.Errorf("%s: volumes %v", name, v)
		}
	}
}

func TestNormalizeNotWAV(t *testing.T) {
	pcm := pcmBytes(ramp(10), 16)
	for name, data := range map[string][]byte{
		"nil":             nil,
		"text":            []byte("hello, this is not audio at all"),
		"json error":      []byte(`{"error":{"message":"nope"}}`),
		"mp3":             append([]byte("ID3\x03\x00\x00\x00\x00\x00\x00"), pcm...),
		"RIFF AVI":        append([]byte("RIFF\x00\x00\x00\x00AVI "), pcm...),
		"header only":     []byte("RIFF\x04\x00\x00\x00WAVE"),
		"no fmt":          wavBytes(nil, chunk{id: "data", body: pcm}),
		"no data":         wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 8000, 16)),
		"fmt too short":   wavBytes(nil, chunk{id: "fmt ", body: make([]byte, 14)}, chunk{id: "data", body: pcm}),
		"fmt past end":    wavBytes(nil, chunk{id: "fmt ", body: make([]byte, 16), size: u32(4000)}),
		"zero channels":   wavBytes(nil, fmtChunk(wavio.FormatPCM, 0, 8000, 16), chunk{id: "data", body: pcm}),
		"zero rate":       wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 0, 16), chunk{id: "data", body: pcm}),
		"data before fmt": wavBytes(nil, chunk{id: "data", body: pcm, size: u32(0x7ffff000)}, fmtChunk(wavio.FormatPCM, 1, 8000, 16)),
	} {
		_, err := Normalize(data)
		if !errors.Is(err, ErrNotWAV) {
			t.Errorf("%s: err = %v, want ErrNotWAV", name, err)
		}
	}
}

func TestNormalizeUnsupported(t *testing.T) {
	pcm := pcmBytes(ramp(10), 16)
	for name, data := range map[string][]byte{
		"mp3 in WAV":   wavBytes(nil, fmtChunk(0x55, 1, 8000, 0), chunk{id: "data", body: pcm}),
		"mu-law":       wavBytes(nil, fmtChunk(0x07, 1, 8000, 8), chunk{id: "data", body: pcm}),
		"16-bit float": wavBytes(nil, fmtChunk(wavio.FormatFloat, 1, 8000, 16), chunk{id: "data", body: pcm}),
		"48-bit PCM":   wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 8000, 48), chunk{id: "data", body: pcm}),
		"huge rate":    wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 4_000_000_000, 16), chunk{id: "data", body: pcm}),
	} {
		_, err := Normalize(data)
		if err == nil || errors.Is(err, ErrNotWAV) {
			t.Errorf("%s: err = %v, want an unsupported-encoding error", name, err)
		}
	}
}

func TestNormalizeRoundTrip(t *testing.T) {
	src := sine(22050, 22050, 220, 0.8)
	in := wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 22050, 16), chunk{id: "data", body: pcmBytes(src, 16)})
	a, err := Normalize(in)
	if err != nil {
		t.Fatal(err)
	}
	checkWAV(t, a)
	if !equalInt16(a.Samples, src) {
		t.Error("samples changed")
	}
	if !bytes.Equal(a.WAV, in) {
		t.Error("a canonical 16-bit mono WAV should come out byte for byte")
	}
	b, err := Normalize(a.WAV)
	if err != nil || !bytes.Equal(b.WAV, a.WAV) || a.Duration != time.Second {
		t.Errorf("second pass: %v, equal=%v, duration %v", err, bytes.Equal(b.WAV, a.WAV), a.Duration)
	}
}

func TestFromPCM16LE(t *testing.T) {
	src := ramp(2400)
	raw := append(pcmBytes(src, 16), 0x42) // odd trailing byte
	a, err := FromPCM16LE(raw, 24000)
	if err != nil {
		t.Fatal(err)
	}
	checkWAV(t, a)
	if !equalInt16(a.Samples, src) || a.Duration != 100*time.Millisecond || a.SampleRate != 24000 {
		t.Errorf("%d samples, %v, %d Hz", len(a.Samples), a.Duration, a.SampleRate)
	}
	if a, err := FromPCM16LE(nil, 24000); err != nil || len(a.Samples) != 0 || len(a.WAV) != 44 {
		t.Errorf("empty: %v %+v", err, a)
	}
	for _, rate := range []int{0, -1, maxSampleRate + 1} {
		if _, err := FromPCM16LE(raw, rate); err == nil {
			t.Errorf("rate %d accepted", rate)
		}
	}
}

// TestNormalizeCorrupted feeds many random corruptions of valid files:
// whatever comes in, Normalize returns (no panic) and anything it accepts
// is a valid canonical WAV.
func TestNormalizeCorrupted(t *testing.T) {
	seeds := [][]byte{
		wavBytes(nil, fmtChunk(wavio.FormatPCM, 2, 22050, 24), chunk{id: "LIST", body: []byte("INFOxxxx")}, chunk{id: "data", body: pcmBytes(ramp(60), 24)}),
		wavBytes(nil, extensibleFmt(wavio.FormatFloat, 1, 48000, 32, 32), chunk{id: "data", body: floatBytes([]float64{0.1, 0.2}, 32)}),
		wavBytes(u32(0x7ffff024), fmtChunk(wavio.FormatPCM, 1, 22050, 16), chunk{id: "data", body: pcmBytes(ramp(30), 16), size: u32(0x7ffff000)}),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		data := append([]byte(nil), seeds[i%len(seeds)]...)
		for range 1 + rng.IntN(4) {
			switch rng.IntN(3) {
			case 0: // flip a byte, mostly in the headers
				data[rng.IntN(min(len(data), 80))] = byte(rng.Uint32())
			case 1: // cut
				data = data[:rng.IntN(len(data)+1)]
			case 2: // set a size field to something extreme
				if len(data) >= 48 {
					off := []int{4, 16, 40, 44}[rng.IntN(4)]
					binary.LittleEndian.PutUint32(data[off:], []uint32{0, 1, 15, 0x7fffffff, math.MaxUint32}[rng.IntN(5)])
				}
			}
			if len(data) == 0 {
				break
			}
		}
		a, err := Normalize(data)
		if err == nil {
			checkWAV(t, a)
		}
	}
}

// FuzzNormalize feeds Normalize arbitrary bytes, as an engine or a server
// could send them. It must never panic; on an error it returns no audio; what
// it accepts must be a canonical WAV whose samples are those of the input,
// decoded here independently of go-audio: one per whole frame, channels
// averaged, scaled to 16 bits.
func FuzzNormalize(f *testing.F) {
	f.Add(wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 22050, 16), chunk{id: "data", body: pcmBytes(ramp(20), 16)}))
	f.Add(wavBytes(nil, fmtChunk(wavio.FormatPCM, 3, 8000, 8), chunk{id: "data", body: []byte{1, 2, 3, 4, 5, 6, 7}}))
	f.Add(wavBytes(nil, fmtChunk(wavio.FormatPCM, 2, 44100, 24), chunk{id: "data", body: pcmBytes(ramp(21), 24)}))
	f.Add(wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, 16000, 12), chunk{id: "data", body: pcmBytes(ramp(9), 16)}))
	f.Add(wavBytes(nil, extensibleFmt(wavio.FormatPCM, 2, 96000, 32, 24), chunk{id: "data", body: pcmBytes(ramp(20), 32)}))
	f.Add(wavBytes(u32(0x7ffff024), fmtChunk(wavio.FormatFloat, 1, 22050, 64), chunk{id: "data", body: floatBytes([]float64{1, -1, 0.5}, 64), size: u32(0x7ffff000)}))
	f.Add(wavBytes(nil, fmtChunk(wavio.FormatFloat, 2, 48000, 32), chunk{id: "data", body: floatBytes([]float64{math.NaN(), 0, math.Inf(1), math.Inf(-1), 3, 0.25}, 32)}))
	f.Add(wavBytes(nil, fmtChunk(wavio.FormatPCM, 1, maxSampleRate+1, 16), chunk{id: "data", body: pcmBytes(ramp(2), 16)}))
	f.Add([]byte("RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 16<<10 {
			return // the headers are what matters; short inputs minimise fast
		}
		a, err := Normalize(data)
		if err != nil {
			if a.WAV != nil || a.Samples != nil || a.SampleRate != 0 || a.Duration != 0 {
				t.Fatalf("error %v, but also audio of %d samples", err, len(a.Samples))
			}
			return
		}
		checkWAV(t, a)
		format, pcm, err := wavio.Parse(data)
		if err != nil {
			t.Fatalf("Normalize accepted what wavio.Parse refuses: %v", err)
		}
		if a.SampleRate != format.Rate {
			t.Fatalf("rate %d, the file says %d", a.SampleRate, format.Rate)
		}
		want := referenceDecode(format, pcm)
		if want == nil {
			t.Fatalf("Normalize accepted %+v", format)
		}
		if !equalInt16(a.Samples, want) {
			t.Fatalf("%+v: %d samples %v…, want %d samples %v…", format, len(a.Samples), a.Samples[:min(8, len(a.Samples))], len(want), want[:min(8, len(want))])
		}
	})
}

// referenceDecode decodes what FuzzNormalize's inputs hold the plain way,
// without go-audio: little-endian integers in whole bytes (8-bit ones
// unsigned) or IEEE floats, averaged over the channels and scaled to 16
// bits. It returns nil for an encoding koe does not read.
func referenceDecode(f wavio.Format, pcm []byte) []int16 {
	width := (f.Bits + 7) / 8
	switch {
	case f.Rate > maxSampleRate:
		return nil
	case f.Tag == wavio.FormatPCM && f.Bits >= 1 && f.Bits <= 32:
	case f.Tag == wavio.FormatFloat && (f.Bits == 32 || f.Bits == 64):
	default:
		return nil
	}
	frames := len(pcm) / (width * f.Channels)
	out := make([]int16, frames)
	for i := range out {
		frame := pcm[i*width*f.Channels:]
		if f.Tag == wavio.FormatFloat {
			var sum float64
			for c := range f.Channels {
				if width == 4 {
					sum += float64(math.Float32frombits(binary.LittleEndian.Uint32(frame[4*c:])))
				} else {
					sum += math.Float64frombits(binary.LittleEndian.Uint64(frame[8*c:]))
				}
			}
			v := sum / float64(f.Channels)
			if math.IsNaN(v) {
				v = 0
			}
			out[i] = int16(math.Round(max(-1, min(1, v)) * 32767))
			continue
		}
		var sum int64
		for c := range f.Channels {
			var u uint64
			for k := width - 1; k >= 0; k-- {
				u = u<<8 | uint64(frame[c*width+k])
			}
			v := int64(u<<(64-8*width)) >> (64 - 8*width) // sign-extend
			if width == 1 {
				v = int64(u) - 128
			}
			sum += v
		}
		avg := sum / int64(f.Channels)
		if width == 1 {
			avg <<= 8
		} else {
			avg >>= 8*width - 16
		}
		out[i] = int16(max(math.MinInt16, min(math.MaxInt16, avg)))
	}
	return out
}

func equalInt16(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
