package tts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/go-audio/audio"
	"github.com/go-audio/wav"
)

// ErrNotWAV means the bytes are not a RIFF/WAVE file koe can find audio in:
// no RIFF/WAVE header, or no usable fmt or data chunk.
var ErrNotWAV = errors.New("not a WAV file")

// WAVE format tags (the first field of the fmt chunk).
const (
	formatPCM        = 0x0001
	formatFloat      = 0x0003
	formatExtensible = 0xFFFE // the real tag is in the sub-format GUID
)

// wavHeaderSize is the size of the canonical header koe writes: RIFF, fmt
// (16 bytes of body) and the data chunk header.
const wavHeaderSize = 44

// maxSampleRate is far above any speech engine's rate; the bound keeps the
// header fields (rate × bytes per frame) within their 32 bits.
const maxSampleRate = 768000

// encodeChunk is how many samples go to the encoder per Write; it bounds
// the []int staging buffer go-audio needs (8 bytes per 2-byte sample).
const encodeChunk = 8192

// wavFormat is what koe reads from a fmt chunk.
type wavFormat struct {
	tag      int // formatPCM or formatFloat, after resolving formatExtensible
	channels int
	rate     int
	bits     int // container bits per sample: 8, 16, 24, 32 or 64
}

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
	f, pcm, err := parseWAV(data)
	if err != nil {
		return Audio{}, err
	}
	var samples []int16
	switch f.tag {
	case formatPCM:
		samples, err = decodeIntPCM(f, pcm)
	case formatFloat:
		samples = decodeFloat(f, pcm)
	}
	if err != nil {
		return Audio{}, err
	}
	return newAudio(samples, f.rate)
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

func newAudio(samples []int16, rate int) (Audio, error) {
	w, err := encodeMono16(samples, rate)
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

// parseWAV finds the format and the sample bytes. It walks the chunks itself
// rather than trusting a decoder with them because it must survive any
// input: sizes that point past the end, placeholders, missing padding.
// The returned data holds whole frames only.
func parseWAV(data []byte) (wavFormat, []byte, error) {
	if len(data) < 12 || !bytes.Equal(data[8:12], []byte("WAVE")) {
		return wavFormat{}, nil, fmt.Errorf("%w: no RIFF/WAVE header", ErrNotWAV)
	}
	// RF64 is RIFF with 64-bit sizes kept in a ds64 chunk and placeholders
	// in the usual places; clamping the placeholders reads it correctly.
	if id := string(data[:4]); id != "RIFF" && id != "RF64" {
		return wavFormat{}, nil, fmt.Errorf("%w: no RIFF/WAVE header", ErrNotWAV)
	}
	var (
		fmtBody, pcm     []byte
		haveFmt, havePCM bool
	)
	// The RIFF size is ignored: streaming writers put placeholders there,
	// and the chunks bound themselves.
	off := 12
	for off+8 <= len(data) && !(haveFmt && havePCM) {
		id := string(data[off : off+4])
		size := int64(binary.LittleEndian.Uint32(data[off+4 : off+8]))
		body := off + 8
		avail := int64(len(data) - body)
		switch id {
		case "fmt ":
			if size < 16 || size > avail {
				return wavFormat{}, nil, fmt.Errorf("%w: fmt chunk is truncated", ErrNotWAV)
			}
			fmtBody, haveFmt = data[body:body+int(size)], true
		case "data":
			if !havePCM {
				pcm, havePCM = data[body:body+int(min(size, avail))], true
			}
		}
		if size >= avail {
			break // this chunk runs to the end of the data
		}
		off = body + int(size)
		// Chunks are padded to even sizes, but some writers forget the pad
		// byte; then the next chunk starts right away.
		if size%2 == 1 && (looksLikeChunk(data, off+1) || !looksLikeChunk(data, off)) {
			off++
		}
	}
	if !haveFmt {
		return wavFormat{}, nil, fmt.Errorf("%w: no fmt chunk (or only after data that runs to the end)", ErrNotWAV)
	}
	if !havePCM {
		return wavFormat{}, nil, fmt.Errorf("%w: no data chunk", ErrNotWAV)
	}
	f, err := parseFormat(fmtBody)
	if err != nil {
		return wavFormat{}, nil, err
	}
	frame := f.channels * f.bits / 8
	return f, pcm[:len(pcm)/frame*frame], nil
}

// looksLikeChunk reports whether a chunk header could start at off: eight
// bytes present, the first four printable ASCII (chunk IDs always are).
func looksLikeChunk(data []byte, off int) bool {
	if off+8 > len(data) {
		return false
	}
	for _, c := range data[off : off+4] {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

func parseFormat(b []byte) (wavFormat, error) {
	f := wavFormat{
		tag:      int(binary.LittleEndian.Uint16(b[0:2])),
		channels: int(binary.LittleEndian.Uint16(b[2:4])),
		rate:     int(binary.LittleEndian.Uint32(b[4:8])),
		bits:     int(binary.LittleEndian.Uint16(b[14:16])),
	}
	if f.tag == formatExtensible && len(b) >= 40 {
		// WAVE_FORMAT_EXTENSIBLE: the first two bytes of the sub-format
		// GUID are the format tag it stands for.
		f.tag = int(binary.LittleEndian.Uint16(b[24:26]))
	}
	if f.channels < 1 {
		return wavFormat{}, fmt.Errorf("%w: fmt chunk says %d channels", ErrNotWAV, f.channels)
	}
	if f.rate < 1 {
		return wavFormat{}, fmt.Errorf("%w: fmt chunk says sample rate %d", ErrNotWAV, f.rate)
	}
	if f.rate > maxSampleRate {
		return wavFormat{}, fmt.Errorf("sample rate %d Hz is not supported (1..%d)", f.rate, maxSampleRate)
	}
	switch {
	case f.tag == formatPCM && f.bits >= 1 && f.bits <= 32:
		// Samples of odd widths (12, 20 bits) sit left-justified in whole
		// bytes, so reading the container width gives the right values.
		f.bits = (f.bits + 7) / 8 * 8
		return f, nil
	case f.tag == formatFloat && (f.bits == 32 || f.bits == 64):
		return f, nil
	}
	return wavFormat{}, fmt.Errorf("unsupported WAV encoding (format tag %#04x, %d bits): koe reads PCM and IEEE float", f.tag, f.bits)
}

// decodeIntPCM decodes integer PCM with go-audio. The decoder is handed a
// clean copy (canonical header, exact sizes, whole frames) rather than the
// engine's bytes: its chunk walker trusts sizes and would read a partial
// frame as a sample, and koe has already found what it needs.
func decodeIntPCM(f wavFormat, pcm []byte) ([]int16, error) {
	frames := len(pcm) / (f.channels * f.bits / 8)
	if frames == 0 {
		return []int16{}, nil
	}
	clean := make([]byte, wavHeaderSize+len(pcm))
	putHeader(clean, formatPCM, f.channels, f.rate, f.bits, len(pcm))
	copy(clean[wavHeaderSize:], pcm)

	dec := wav.NewDecoder(bytes.NewReader(clean))
	buf := &audio.IntBuffer{Data: make([]int, frames*f.channels)}
	n, err := dec.PCMBuffer(buf)
	if err != nil {
		return nil, fmt.Errorf("decoding %d-bit PCM: %w", f.bits, err)
	}
	if n != len(buf.Data) {
		return nil, fmt.Errorf("decoding %d-bit PCM: got %d of %d samples", f.bits, n, len(buf.Data))
	}

	// go-audio returns each width in its own scale (8-bit unsigned around
	// 128, the rest signed); shift everything to 16 bits after averaging.
	shift := f.bits - 16
	center := int64(0)
	if f.bits == 8 {
		center = 128
	}
	out := make([]int16, frames)
	ch := int64(f.channels)
	for i := range out {
		var sum int64
		for _, v := range buf.Data[i*f.channels : (i+1)*f.channels] {
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
func decodeFloat(f wavFormat, pcm []byte) []int16 {
	size := f.bits / 8
	frames := len(pcm) / (f.channels * size)
	out := make([]int16, frames)
	for i := range out {
		var sum float64
		for c := range f.channels {
			p := pcm[(i*f.channels+c)*size:]
			if size == 4 {
				sum += float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))
			} else {
				sum += math.Float64frombits(binary.LittleEndian.Uint64(p))
			}
		}
		v := sum / float64(f.channels)
		if math.IsNaN(v) {
			v = 0
		}
		v = max(-1, min(1, v))
		out[i] = int16(math.Round(v * math.MaxInt16))
	}
	return out
}

// encodeMono16 writes a canonical 16-bit mono WAV with go-audio's encoder.
func encodeMono16(samples []int16, rate int) ([]byte, error) {
	ws := &memWriteSeeker{buf: make([]byte, 0, wavHeaderSize+2*len(samples))}
	// NewEncoder preallocates a minute of audio at the rate it is given
	// (2.6 MB at 22 kHz) for every call; building it at 1 Hz and setting
	// the real rate afterwards keeps that to a few bytes. The header is
	// written from the SampleRate field, so the file is the same.
	enc := wav.NewEncoder(ws, 1, 16, 1, formatPCM)
	enc.SampleRate = rate
	buf := &audio.IntBuffer{
		Format:         &audio.Format{NumChannels: 1, SampleRate: rate},
		SourceBitDepth: 16,
		Data:           make([]int, min(len(samples), encodeChunk)),
	}
	// At least one Write, even without samples: it is what writes the
	// header and the data chunk, and Close only patches their sizes.
	for start := 0; start == 0 || start < len(samples); start += encodeChunk {
		part := samples[start:min(start+encodeChunk, len(samples))]
		buf.Data = buf.Data[:len(part)]
		for i, s := range part {
			buf.Data[i] = int(s)
		}
		if err := enc.Write(buf); err != nil {
			return nil, fmt.Errorf("encoding WAV: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding WAV: %w", err)
	}
	return ws.buf, nil
}

// putHeader writes a canonical 44-byte WAV header into b.
func putHeader(b []byte, tag, channels, rate, bits, dataLen int) {
	le := binary.LittleEndian
	copy(b[0:4], "RIFF")
	le.PutUint32(b[4:8], uint32(36+dataLen))
	copy(b[8:16], "WAVEfmt ")
	le.PutUint32(b[16:20], 16)
	le.PutUint16(b[20:22], uint16(tag))
	le.PutUint16(b[22:24], uint16(channels))
	le.PutUint32(b[24:28], uint32(rate))
	le.PutUint32(b[28:32], uint32(rate*channels*bits/8))
	le.PutUint16(b[32:34], uint16(channels*bits/8))
	le.PutUint16(b[34:36], uint16(bits))
	copy(b[36:40], "data")
	le.PutUint32(b[40:44], uint32(dataLen))
}

// memWriteSeeker is the in-memory file go-audio's encoder writes to: it
// needs to seek back to patch the sizes once the data is written.
type memWriteSeeker struct {
	buf []byte
	pos int
}

func (m *memWriteSeeker) Write(p []byte) (int, error) {
	if end := m.pos + len(p); end > len(m.buf) {
		m.buf = append(m.buf, make([]byte, end-len(m.buf))...)
	}
	copy(m.buf[m.pos:], p)
	m.pos += len(p)
	return len(p), nil
}

func (m *memWriteSeeker) Seek(offset int64, whence int) (int64, error) {
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = int64(m.pos)
	case io.SeekEnd:
		base = int64(len(m.buf))
	default:
		return 0, fmt.Errorf("memWriteSeeker: bad whence %d", whence)
	}
	p := base + offset
	if p < 0 || p > math.MaxInt32 {
		return 0, fmt.Errorf("memWriteSeeker: seek to %d is out of range", p)
	}
	m.pos = int(p)
	return p, nil
}
