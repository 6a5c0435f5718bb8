package tts

import (
	"testing"

	"koe/internal/wavio"
)

// espeakSized is what espeak-ng --stdout writes for a sentence of about
// twelve words: 3 s of 22050 Hz 16-bit mono with placeholder sizes.
func espeakSized() []byte {
	return wavBytes(u32(0x7ffff024), fmtChunk(wavio.FormatPCM, 1, 22050, 16),
		chunk{id: "data", body: pcmBytes(sine(3*22050, 22050, 180, 0.6), 16), size: u32(0x7ffff000)})
}

func BenchmarkNormalize(b *testing.B) {
	data := espeakSized()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Normalize(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNormalizeStereoFloat(b *testing.B) {
	src := sine(2*3*24000, 24000, 180, 0.6)
	values := make([]float64, len(src))
	for i, s := range src {
		values[i] = float64(s) / 32767
	}
	data := wavBytes(nil, fmtChunk(wavio.FormatFloat, 2, 24000, 32), chunk{id: "data", body: floatBytes(values, 32)})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Normalize(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromPCM16LE(b *testing.B) {
	raw := pcmBytes(sine(3*24000, 24000, 180, 0.6), 16)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromPCM16LE(raw, 24000); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVolumes(b *testing.B) {
	samples := sine(3*22050, 22050, 180, 0.6)
	b.ReportAllocs()
	for b.Loop() {
		Volumes(samples, 22050, 20)
	}
}

// BenchmarkEspeak is the latency of one real synthesis of a twelve-word
// sentence: process start, synthesis, Normalize.
func BenchmarkEspeak(b *testing.B) {
	e := newTestEspeak(b)
	const sentence = "The weather today is lovely, so we should go for a long walk."
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Synthesize(b.Context(), sentence); err != nil {
			b.Fatal(err)
		}
	}
}
