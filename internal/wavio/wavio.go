// Package wavio reads and writes the WAV files koe passes between its
// speech engines and clients: it finds the format and samples in whatever
// an engine or client sent, and writes the canonical 16-bit mono form.
// What to accept beyond that (which encodings, which rates) is the
// caller's choice: tts converts almost anything, asr takes one format.
package wavio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/go-audio/audio"
	"github.com/go-audio/wav"
)

// WAVE format tags (the first field of the fmt chunk).
const (
	FormatPCM        = 0x0001
	FormatFloat      = 0x0003
	FormatExtensible = 0xFFFE // the real tag is in the sub-format GUID
)

// HeaderSize is the size of the canonical header: RIFF, fmt (16 bytes of
// body) and the data chunk header.
const HeaderSize = 44

// Format is what koe reads from a fmt chunk.
type Format struct {
	Tag      int // after resolving FormatExtensible to its sub-format
	Channels int
	Rate     int
	Bits     int // bits per sample as the fmt chunk states them
}

// frameSize is the bytes of one frame: samples of odd widths (12, 20 bits)
// sit in whole bytes.
func (f Format) frameSize() int { return f.Channels * ((f.Bits + 7) / 8) }

// Parse finds the format and the sample bytes of a RIFF/WAVE file. It walks
// the chunks itself rather than trusting a decoder with them because it
// must survive any input: RIFF and data sizes that are placeholders or
// point past the end (the data then runs to the end), missing pad bytes,
// chunks it does not need (LIST, fact, …) before or after the data. RF64
// reads too: it keeps placeholders in the usual places, which the same
// clamping handles. The data holds whole frames only.
//
// Every error means data is not a WAV file Parse can find audio in. The
// messages say what is missing without a prefix, so that callers can wrap
// them in their own sentinel error.
func Parse(data []byte) (Format, []byte, error) {
	if len(data) < 12 || !bytes.Equal(data[8:12], []byte("WAVE")) {
		return Format{}, nil, errors.New("no RIFF/WAVE header")
	}
	if id := string(data[:4]); id != "RIFF" && id != "RF64" {
		return Format{}, nil, errors.New("no RIFF/WAVE header")
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
				return Format{}, nil, errors.New("the fmt chunk is truncated")
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
	switch {
	case !haveFmt && havePCM:
		// The data ran to the end with no fmt chunk before it.
		return Format{}, nil, errors.New("the data chunk comes before any fmt chunk")
	case !haveFmt:
		return Format{}, nil, errors.New("no fmt chunk")
	case !havePCM:
		return Format{}, nil, errors.New("no data chunk")
	}
	f, err := parseFormat(fmtBody)
	if err != nil {
		return Format{}, nil, err
	}
	if frame := f.frameSize(); frame > 0 {
		pcm = pcm[:len(pcm)/frame*frame]
	}
	return f, pcm, nil
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

func parseFormat(b []byte) (Format, error) {
	f := Format{
		Tag:      int(binary.LittleEndian.Uint16(b[0:2])),
		Channels: int(binary.LittleEndian.Uint16(b[2:4])),
		Rate:     int(binary.LittleEndian.Uint32(b[4:8])),
		Bits:     int(binary.LittleEndian.Uint16(b[14:16])),
	}
	if f.Tag == FormatExtensible && len(b) >= 40 {
		// WAVE_FORMAT_EXTENSIBLE: the first two bytes of the sub-format
		// GUID are the format tag it stands for.
		f.Tag = int(binary.LittleEndian.Uint16(b[24:26]))
	}
	if f.Channels < 1 {
		return Format{}, fmt.Errorf("the fmt chunk says %d channels", f.Channels)
	}
	if f.Rate < 1 {
		return Format{}, fmt.Errorf("the fmt chunk says sample rate %d", f.Rate)
	}
	return f, nil
}

// AppendHeader appends a canonical 44-byte header for dataLen bytes of
// samples in format f to b.
func AppendHeader(b []byte, f Format, dataLen int) []byte {
	le := binary.LittleEndian
	b = append(b, "RIFF"...)
	b = le.AppendUint32(b, uint32(36+dataLen))
	b = append(b, "WAVEfmt "...)
	b = le.AppendUint32(b, 16)
	b = le.AppendUint16(b, uint16(f.Tag))
	b = le.AppendUint16(b, uint16(f.Channels))
	b = le.AppendUint32(b, uint32(f.Rate))
	b = le.AppendUint32(b, uint32(f.Rate*f.frameSize()))
	b = le.AppendUint16(b, uint16(f.frameSize()))
	b = le.AppendUint16(b, uint16(f.Bits))
	b = append(b, "data"...)
	return le.AppendUint32(b, uint32(dataLen))
}

// encodeChunk is how many samples go to the encoder per Write; it bounds
// the []int staging buffer go-audio needs (8 bytes per 2-byte sample).
const encodeChunk = 8192

// EncodeMono16 writes a canonical 16-bit mono PCM WAV of the samples at
// rate with go-audio's encoder. The only failure is a file too large for
// the in-memory writer (past 2 GB).
func EncodeMono16(samples []int16, rate int) ([]byte, error) {
	ws := &memWriteSeeker{buf: make([]byte, 0, HeaderSize+2*len(samples))}
	// NewEncoder preallocates a minute of audio at the rate it is given on
	// every call (1.9 MB at 16 kHz, 2.6 MB at 22 kHz); building it at 1 Hz
	// and setting the real rate afterwards keeps that to a few bytes. The
	// header is written from the SampleRate field, so the file is the same.
	enc := wav.NewEncoder(ws, 1, 16, 1, FormatPCM)
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
