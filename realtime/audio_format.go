package realtime

import (
	"encoding/binary"
	"slices"

	"koe/internal/g711"
)

// The bytes of the session's audio formats (session.go names them): 16-bit
// little-endian PCM, or G.711 µ-law (audio/pcmu) and A-law (audio/pcma),
// one byte a sample.

// bytesPerSample is 2 for PCM, 1 for G.711.
func (f audioFormat) bytesPerSample() int {
	if f.kind == formatPCM.kind {
		return 2
	}
	return 1
}

// millis is how long n bytes of the format play, in whole milliseconds
// (rounded down).
func (f audioFormat) millis(n int) int {
	return int(int64(n) * 1000 / int64(f.rate*f.bytesPerSample()))
}

// bytes is how many bytes ms milliseconds of the format take, whole
// samples (rounded down).
func (f audioFormat) bytes(ms int) int {
	return int(int64(ms)*int64(f.rate)/1000) * f.bytesPerSample()
}

// encode appends samples at the format's rate, written in its encoding,
// to dst.
func (f audioFormat) encode(dst []byte, samples []int16) []byte {
	switch f.kind {
	case formatPCMU.kind:
		return g711.AppendULaw(dst, samples)
	case formatPCMA.kind:
		return g711.AppendALaw(dst, samples)
	}
	dst = slices.Grow(dst, 2*len(samples))
	for _, s := range samples {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(s))
	}
	return dst
}

// decode appends the samples of b's whole samples to dst and returns the
// bytes of a sample cut at the end of b (an odd byte of PCM), which the
// next chunk completes. Every byte of G.711 is a sample.
func (f audioFormat) decode(dst []int16, b []byte) ([]int16, []byte) {
	switch f.kind {
	case formatPCMU.kind:
		return g711.AppendULawSamples(dst, b), nil
	case formatPCMA.kind:
		return g711.AppendALawSamples(dst, b), nil
	}
	n := len(b) / 2
	dst = slices.Grow(dst, n)
	for i := range n {
		dst = append(dst, int16(binary.LittleEndian.Uint16(b[2*i:])))
	}
	return dst, b[2*n:]
}
