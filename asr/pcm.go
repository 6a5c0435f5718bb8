package asr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"koe/internal/wavio"
)

// SampleRate is the rate ASR engines and the VAD take: 16 kHz mono.
const SampleRate = 16000

// ErrBadAudio wraps every validation failure of client audio, so callers
// can answer with an error frame (errors.Is) instead of dropping the
// connection.
var ErrBadAudio = errors.New("bad audio")

// pcmTolerance is how far past full scale a float sample may go and still
// be accepted (and clamped). Browsers' audio graphs overshoot ±1 slightly
// after gain or resampling; anything further out is a client bug.
const pcmTolerance = 0.01

// FloatsToPCM16 validates float samples from a client (JSON numbers already
// decoded to float64) and converts them to 16-bit PCM at a scale of 32767.
// NaN or ±Inf, and values outside [-1-0.01, 1+0.01], give an error wrapping
// ErrBadAudio that names the first bad index and value; overshoot within
// the tolerance is clamped to full scale.
func FloatsToPCM16(samples []float64) ([]int16, error) {
	out := make([]int16, len(samples))
	for i, v := range samples {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: sample %d is %v, not a finite number", ErrBadAudio, i, v)
		}
		if v < -1-pcmTolerance || v > 1+pcmTolerance {
			return nil, fmt.Errorf("%w: sample %d is %v, outside [-1, 1]", ErrBadAudio, i, v)
		}
		v = max(-1, min(1, v))
		out[i] = int16(math.Round(v * math.MaxInt16))
	}
	return out, nil
}

// PCM16FromBytes decodes signed 16-bit little-endian PCM, the payload of
// binary WebSocket audio frames. An odd number of bytes cannot be whole
// samples and gives an error wrapping ErrBadAudio.
func PCM16FromBytes(b []byte) ([]int16, error) {
	if len(b)%2 != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of 16-bit samples", ErrBadAudio, len(b))
	}
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out, nil
}

// EncodeWAV returns a complete 16-bit mono PCM WAV file of the samples at
// sampleRate (a positive rate; callers pass SampleRate or a rate they have
// already validated).
func EncodeWAV(samples []int16, sampleRate int) []byte {
	b, err := wavio.EncodeMono16(samples, sampleRate)
	if err != nil {
		// Only the in-memory writer can fail, past 2 GB: over 18 hours
		// at 16 kHz, which no utterance comes near.
		panic(fmt.Sprintf("asr: encoding WAV in memory: %v", err))
	}
	return b
}
