package tts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-audio/audio"
	"github.com/go-audio/wav"

	"koe/internal/wavio"
)

// ErrNotWAV means the bytes are not a RIFF/WAVE file koe can find audio in:
// no RIFF/WAVE header, or no usable fmt or data chunk.
var ErrNotWAV = errors.New("not a WAV file")

// maxSampleRate is far above any speech engine's rate; the bound keeps the
// header fields (rate × bytes per frame) within their 32 bits.
const maxSampleRate = 768000

// Audio is a complete 16-bit PCM mono WAV plus what koe needs to know about it.
type Audio struct {
	WAV        []byte // complete RIFF/WAVE file, PCM 16-bit, mono, correct sizes
	Samples    []int16
	SampleRate int
	Duration   time.Duration
}

// Normalize turns whatever WAV an engine produced into Audio: 16-bit mono
// at the input's sample rate. It reads integer PCM (8, 16, 24, 32 bits) and
// IEEE float (32, 64 bits), averages channels down to mono, and tolerates
// what streaming writers leave behind: RIFF and data sizes that are
// placeholders or larger than the bytes present (the data then runs to the
// end), a partial last frame (dropped), and chunks koe does not need (LIST,
// fact, …), which it skips. Bytes that are not a WAV give an error wrapping
// ErrNotWAV; an empty data chunk is valid and gives Audio with no samples.
func Normalize(data []byte) (Audio, error) {
	f, pcm, err := wavio.Parse(data)
	if err != nil {
		return Audio{}, fmt.Errorf("%w: %w", ErrNotWAV, err)
	}
	if f, err = supported(f); err != nil {
		return Audio{}, err
	}
	var samples []int16
	switch f.Tag {
	case wavio.FormatPCM:
		samples, err = decodeIntPCM(f, pcm)
	case wavio.FormatFloat:
		samples = decodeFloat(f, pcm)
	}
	if err != nil {
		return Audio{}, err
	}
	return newAudio(samples, f.Rate)
}

// FromPCM16LE wraps raw signed 16-bit little-endian mono samples, such as
// OpenAI's "pcm" response format (24 kHz). An odd trailing byte is dropped.
func FromPCM16LE(raw []byte, sampleRate int) (Audio, error) {
	if sampleRate < 1 || sampleRate > maxSampleRate {
		return Audio{}, fmt.Errorf("sample rate %d Hz is not supported (1..%d)", sampleRate, maxSampleRate)
	}
	samples := make([]int16, len(raw)/2)
	for i := range samples {
		samples[i] = int16(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	return newAudio(samples, sampleRate)
}

// FromSamples wraps 16-bit mono samples at rate, such as a piece of a
// Stream, in a complete WAV. It keeps samples.
func FromSamples(samples []int16, rate int) (Audio, error) {
	if rate < 1 || rate > maxSampleRate {
		return Audio{}, fmt.Errorf("sample rate %d Hz is not supported (1..%d)", rate, maxSampleRate)
	}
	return newAudio(samples, rate)
}

func newAudio(samples []int16, rate int) (Audio, error) {
	w, err := wavio.EncodeMono16(samples, rate)
	if err != nil {
		return Audio{}, err
	}
	return Audio{
		WAV:        w,
		Samples:    samples,
		SampleRate: rate,
		Duration:   time.Duration(len(samples)) * time.Second / time.Duration(rate),
	}, nil
}

// supported checks that koe can decode f, and rounds odd sample widths
// (12, 20 bits) up to the whole bytes they sit in, left-justified, so that
// reading the container width gives the right values.
func supported(f wavio.Format) (wavio.Format, error) {
	if f.Rate > maxSampleRate {
		return wavio.Format{}, fmt.Errorf("sample rate %d Hz is not supported (1..%d)", f.Rate, maxSampleRate)
	}
	switch {
	case f.Tag == wavio.FormatPCM && f.Bits >= 1 && f.Bits <= 32:
		f.Bits = (f.Bits + 7) / 8 * 8
		return f, nil
	case f.Tag == wavio.FormatFloat && (f.Bits == 32 || f.Bits == 64):
		return f, nil
	}
	return wavio.Format{}, fmt.Errorf("unsupported WAV encoding (format tag %#04x, %d bits): koe reads PCM and IEEE float", f.Tag, f.Bits)
}

// decodeIntPCM decodes integer PCM with go-audio. The decoder is handed a
// clean copy (canonical header, exact sizes, whole frames) rather than the
// engine's bytes: its chunk walker trusts sizes and would read a partial
// frame as a sample, and koe has already found what it needs.
func decodeIntPCM(f wavio.Format, pcm []byte) ([]int16, error) {
	frames := len(pcm) / (f.Channels * f.Bits / 8)
	if frames == 0 {
		return []int16{}, nil
	}
	clean := wavio.AppendHeader(make([]byte, 0, wavio.HeaderSize+len(pcm)), f, len(pcm))
	clean = append(clean, pcm...)

	dec := wav.NewDecoder(bytes.NewReader(clean))
	buf := &audio.IntBuffer{Data: make([]int, frames*f.Channels)}
	n, err := dec.PCMBuffer(buf)
	if err != nil {
		return nil, fmt.Errorf("decoding %d-bit PCM: %w", f.Bits, err)
	}
	if n != len(buf.Data) {
		return nil, fmt.Errorf("decoding %d-bit PCM: got %d of %d samples", f.Bits, n, len(buf.Data))
	}

	// go-audio returns each width in its own scale (8-bit unsigned around
	// 128, the rest signed); shift everything to 16 bits after averaging.
	shift := f.Bits - 16
	center := int64(0)
	if f.Bits == 8 {
		center = 128
	}
	out := make([]int16, frames)
	ch := int64(f.Channels)
	for i := range out {
		var sum int64
		for _, v := range buf.Data[i*f.Channels : (i+1)*f.Channels] {
			sum += int64(v) - center
		}
		avg := sum / ch
		if shift >= 0 {
			avg >>= shift
		} else {
			avg <<= -shift
		}
		out[i] = int16(max(math.MinInt16, min(math.MaxInt16, avg)))
	}
	return out, nil
}

// decodeFloat reads IEEE float samples, which go-audio cannot decode.
func decodeFloat(f wavio.Format, pcm []byte) []int16 {
	size := f.Bits / 8
	frames := len(pcm) / (f.Channels * size)
	out := make([]int16, frames)
	for i := range out {
		var sum float64
		for c := range f.Channels {
			p := pcm[(i*f.Channels+c)*size:]
			if size == 4 {
				sum += float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			} else {
				sum += math.Float64frombits(binary.LittleEndian.Uint64(p))
			}
		}
		v := sum / float64(f.Channels)
		if math.IsNaN(v) {
			v = 0
		}
		v = max(-1, min(1, v))
		out[i] = int16(math.Round(v * math.MaxInt16))
	}
	return out
}
