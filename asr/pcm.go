package asr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/go-audio/audio"
	"github.com/go-audio/wav"
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

// wavChunkSamples is how many samples go to the encoder per Write; it bounds
// go-audio's []int staging buffer (8 bytes for every 2-byte sample).
const wavChunkSamples = 8192

// wavPCMFormat is the WAVE format tag for integer PCM.
const wavPCMFormat = 1

// EncodeWAV returns a complete 16-bit mono PCM WAV file of the samples at
// sampleRate (a positive rate; callers pass SampleRate or a rate they have
// already validated).
func EncodeWAV(samples []int16, sampleRate int) []byte {
	ws := &wavMemFile{buf: make([]byte, 0, 44+2*len(samples))}
	// wav.NewEncoder preallocates a minute of audio at the rate it is given
	// on every call (1.9 MB at 16 kHz); building it at 1 Hz and setting the
	// real rate afterwards avoids that. The header is written from the
	// SampleRate field, so the file is the same.
	enc := wav.NewEncoder(ws, 1, 16, 1, wavPCMFormat)
	enc.SampleRate = sampleRate
	buf := &audio.IntBuffer{
		Format:         &audio.Format{NumChannels: 1, SampleRate: sampleRate},
		SourceBitDepth: 16,
		Data:           make([]int, min(len(samples), wavChunkSamples)),
	}
	// At least one Write even without samples: Write emits the header and
	// the data chunk, Close only patches their sizes.
	for start := 0; start == 0 || start < len(samples); start += wavChunkSamples {
		part := samples[start:min(start+wavChunkSamples, len(samples))]
		buf.Data = buf.Data[:len(part)]
		for i, s := range part {
			buf.Data[i] = int(s)
		}
		if err := enc.Write(buf); err != nil {
			// Only the writer can fail, and wavMemFile never does.
			panic(fmt.Sprintf("asr: encoding WAV in memory: %v", err))
		}
	}
	if err := enc.Close(); err != nil {
		panic(fmt.Sprintf("asr: encoding WAV in memory: %v", err))
	}
	return ws.buf
}

// wavMemFile is the in-memory file go-audio's encoder writes to; it must
// seek back to patch the RIFF and data sizes once the samples are written.
type wavMemFile struct {
	buf []byte
	pos int
}

func (m *wavMemFile) Write(p []byte) (int, error) {
	if end := m.pos + len(p); end > len(m.buf) {
		m.buf = append(m.buf, make([]byte, end-len(m.buf))...)
	}
	copy(m.buf[m.pos:], p)
	m.pos += len(p)
	return len(p), nil
}

func (m *wavMemFile) Seek(offset int64, whence int) (int64, error) {
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = int64(m.pos)
	case io.SeekEnd:
		base = int64(len(m.buf))
	default:
		return 0, fmt.Errorf("wavMemFile: bad whence %d", whence)
	}
	p := base + offset
	if p < 0 || p > math.MaxInt32 {
		return 0, fmt.Errorf("wavMemFile: seek to %d is out of range", p)
	}
	m.pos = int(p)
	return p, nil
}
