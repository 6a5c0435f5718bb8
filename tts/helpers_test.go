package tts

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/go-audio/wav"

	"koe/internal/wavio"
	"koe/testkit/proctest"
)

// chunk is one RIFF chunk for wavBytes.
type chunk struct {
	id   string
	body []byte
	// size, if non-nil, is written instead of len(body) (placeholders,
	// truncated files).
	size *uint32
	// noPad leaves out the pad byte after an odd-sized body, as some
	// writers wrongly do.
	noPad bool
}

func u32(v uint32) *uint32 { return &v }

// wavBytes assembles a RIFF/WAVE file from chunks; riffSize nil means the
// correct size.
func wavBytes(riffSize *uint32, chunks ...chunk) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF")
	b.Write([]byte{0, 0, 0, 0})
	b.WriteString("WAVE")
	for _, c := range chunks {
		b.WriteString(c.id)
		size := uint32(len(c.body))
		if c.size != nil {
			size = *c.size
		}
		_ = binary.Write(&b, binary.LittleEndian, size)
		b.Write(c.body)
		if len(c.body)%2 == 1 && !c.noPad {
			b.WriteByte(0)
		}
	}
	out := b.Bytes()
	size := uint32(len(out) - 8)
	if riffSize != nil {
		size = *riffSize
	}
	binary.LittleEndian.PutUint32(out[4:8], size)
	return out
}

// fmtChunk is a plain 16-byte fmt chunk.
func fmtChunk(tag, channels, rate, bits int) chunk {
	b := make([]byte, 16)
	le := binary.LittleEndian
	le.PutUint16(b[0:], uint16(tag))
	le.PutUint16(b[2:], uint16(channels))
	le.PutUint32(b[4:], uint32(rate))
	le.PutUint32(b[8:], uint32(rate*channels*bits/8))
	le.PutUint16(b[12:], uint16(channels*bits/8))
	le.PutUint16(b[14:], uint16(bits))
	return chunk{id: "fmt ", body: b}
}

// extensibleFmt is a WAVE_FORMAT_EXTENSIBLE fmt chunk for subTag.
func extensibleFmt(subTag, channels, rate, bits, validBits int) chunk {
	c := fmtChunk(wavio.FormatExtensible, channels, rate, bits)
	ext := make([]byte, 24)
	le := binary.LittleEndian
	le.PutUint16(ext[0:], 22)
	le.PutUint16(ext[2:], uint16(validBits))
	le.PutUint32(ext[4:], 0x3) // front left and right
	le.PutUint16(ext[8:], uint16(subTag))
	copy(ext[10:], []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71})
	c.body = append(c.body, ext...)
	return c
}

// pcmBytes encodes int16 values at the given width, the way WAV stores them.
func pcmBytes(samples []int16, bits int) []byte {
	var b []byte
	le := binary.LittleEndian
	for _, s := range samples {
		switch bits {
		case 8:
			b = append(b, uint8(int(s)>>8+128))
		case 16:
			b = le.AppendUint16(b, uint16(s))
		case 24:
			v := int32(s) << 8
			b = append(b, byte(v), byte(v>>8), byte(v>>16))
		case 32:
			b = le.AppendUint32(b, uint32(int32(s)<<16))
		}
	}
	return b
}

func floatBytes(values []float64, bits int) []byte {
	var b []byte
	le := binary.LittleEndian
	for _, v := range values {
		if bits == 32 {
			b = le.AppendUint32(b, math.Float32bits(float32(v)))
		} else {
			b = le.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b
}

// ramp is a deterministic signal that covers the whole int16 range.
func ramp(n int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(i*2731 - 32768*(i%3))
	}
	return s
}

// sine is a tone of amplitude amp (0..1).
func sine(n, rate int, hz, amp float64) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(math.Round(amp * 32767 * math.Sin(2*math.Pi*hz*float64(i)/float64(rate))))
	}
	return s
}

// checkWAV verifies that a.WAV is a canonical 16-bit mono PCM file whose
// header sizes match its data, and that go-audio reads back a.Samples.
func checkWAV(t *testing.T, a Audio) {
	t.Helper()
	w := a.WAV
	if len(w) < 44 {
		t.Fatalf("WAV is %d bytes", len(w))
	}
	le := binary.LittleEndian
	if string(w[0:4]) != "RIFF" || string(w[8:16]) != "WAVEfmt " || string(w[36:40]) != "data" {
		t.Fatalf("not a canonical WAV header: %q", w[:44])
	}
	if got, want := le.Uint32(w[4:8]), uint32(len(w)-8); got != want {
		t.Errorf("RIFF size = %d, want %d", got, want)
	}
	if got, want := le.Uint32(w[40:44]), uint32(len(w)-44); got != want {
		t.Errorf("data size = %d, want %d", got, want)
	}
	if got := le.Uint32(w[16:20]); got != 16 {
		t.Errorf("fmt size = %d", got)
	}
	if tag, ch, bits := le.Uint16(w[20:22]), le.Uint16(w[22:24]), le.Uint16(w[34:36]); tag != 1 || ch != 1 || bits != 16 {
		t.Errorf("format tag %d, %d channels, %d bits; want PCM mono 16", tag, ch, bits)
	}
	if got := le.Uint32(w[24:28]); int(got) != a.SampleRate {
		t.Errorf("header rate %d, Audio.SampleRate %d", got, a.SampleRate)
	}
	if got := le.Uint32(w[28:32]); int(got) != 2*a.SampleRate {
		t.Errorf("byte rate %d", got)
	}
	if got := le.Uint16(w[32:34]); got != 2 {
		t.Errorf("block align %d", got)
	}
	if len(w)-44 != 2*len(a.Samples) {
		t.Fatalf("data holds %d bytes for %d samples", len(w)-44, len(a.Samples))
	}
	want := time.Duration(len(a.Samples)) * time.Second / time.Duration(a.SampleRate)
	if a.Duration != want {
		t.Errorf("Duration = %v, want %v", a.Duration, want)
	}

	dec := wav.NewDecoder(bytes.NewReader(w))
	if !dec.IsValidFile() && len(a.Samples) > 0 {
		t.Fatalf("go-audio says the WAV is invalid: %v", dec.Err())
	}
	if len(a.Samples) == 0 {
		return
	}
	dec = wav.NewDecoder(bytes.NewReader(w))
	buf, err := dec.FullPCMBuffer()
	if err != nil {
		t.Fatalf("go-audio cannot decode the WAV: %v", err)
	}
	if dec.NumChans != 1 || dec.BitDepth != 16 || int(dec.SampleRate) != a.SampleRate || dec.PCMSize != len(w)-44 {
		t.Errorf("go-audio reads %d ch, %d bits, %d Hz, %d data bytes", dec.NumChans, dec.BitDepth, dec.SampleRate, dec.PCMSize)
	}
	if len(buf.Data) != len(a.Samples) {
		t.Fatalf("go-audio decodes %d samples, Audio has %d", len(buf.Data), len(a.Samples))
	}
	for i, v := range buf.Data {
		if int16(v) != a.Samples[i] {
			t.Fatalf("sample %d: WAV has %d, Samples has %d", i, v, a.Samples[i])
		}
	}
}

// espeakBinary returns espeak-ng's path, or skips the test without it.
func espeakBinary(tb testing.TB) string {
	tb.Helper()
	return proctest.LookPath(tb, "espeak-ng", "espeak-ng")
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
