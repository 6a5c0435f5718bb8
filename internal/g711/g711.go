// Package g711 encodes and decodes ITU-T G.711 telephone audio: µ-law
// (PCMU, North America and Japan) and A-law (PCMA, elsewhere), one byte per
// sample at 8 kHz. Samples are 16-bit linear PCM on both sides; the codecs'
// own 14-bit (µ-law) and 13-bit (A-law) linear ranges are those of 16 bits
// shifted, so full scale means the same in both.
//
// Decoding is a table look-up (256 entries per law, built from the
// formulas at start-up); encoding finds the segment from the magnitude's
// highest bit. decode(encode(x)) is the centre of the quantisation step x
// falls in, and encode(decode(c)) == c for every code but µ-law's
// negative zero (0x7F), which decodes to 0 and so encodes as 0xFF.
package g711

import "math/bits"

// µ-law. The magnitude, biased by 132 (33 in 14-bit units) so that every
// segment starts at a power of two, is coded as a 3-bit exponent (the
// segment, from its highest bit) and the 4 bits after it; the byte is
// inverted on the line, so that silence is 0xFF.
const (
	ulawBias = 0x84
	// ulawClip is the largest magnitude that, biased, stays within the
	// last segment (32635 + 132 = 32767).
	ulawClip = 32635
)

// A-law. The 12-bit magnitude (the 16-bit one over 8) is coded as a 3-bit
// segment and 4 bits of mantissa; segment 0 and 1 share a step of 2 (so
// the curve is linear through zero), each later one doubles it. Even bits
// are inverted on the line (XOR 0x55); the sign bit is set for positive
// samples.
const alawXOR = 0x55

var (
	ulawTable [256]int16
	alawTable [256]int16
)

func init() {
	for i := range 256 {
		ulawTable[i] = ulawDecode(byte(i))
		alawTable[i] = alawDecode(byte(i))
	}
}

// ulawDecode is the G.711 µ-law expansion of one code.
func ulawDecode(c byte) int16 {
	u := ^c
	exponent := (u >> 4) & 0x07
	t := (int32(u&0x0F)<<3 + ulawBias) << exponent
	if u&0x80 != 0 {
		return int16(ulawBias - t)
	}
	return int16(t - ulawBias)
}

// alawDecode is the G.711 A-law expansion of one code.
func alawDecode(c byte) int16 {
	a := c ^ alawXOR
	seg := (a >> 4) & 0x07
	mag := int32(a&0x0F)<<4 + 8 // the middle of the step, 16-bit units
	if seg > 0 {
		mag = (int32(a&0x0F)<<4 + 0x108) << (seg - 1)
	}
	if a&0x80 != 0 {
		return int16(mag)
	}
	return int16(-mag)
}

// EncodeULaw returns the µ-law code of one 16-bit sample.
func EncodeULaw(s int16) byte {
	x := int32(s)
	var sign byte
	if x < 0 {
		x, sign = -x, 0x80
	}
	x = min(x, ulawClip) + ulawBias // 132..32767: bit 7 to bit 14 is the highest
	exponent := byte(bits.Len32(uint32(x)) - 8)
	mantissa := byte(x>>(exponent+3)) & 0x0F
	return ^(sign | exponent<<4 | mantissa)
}

// EncodeALaw returns the A-law code of one 16-bit sample.
func EncodeALaw(s int16) byte {
	x := int32(s)
	sign := byte(0x80)
	if x < 0 {
		x, sign = -x, 0
	}
	mag := min(x>>3, 0x0FFF) // 12 bits
	var seg, mantissa byte
	if mag < 32 {
		mantissa = byte(mag >> 1)
	} else {
		seg = byte(bits.Len32(uint32(mag)) - 5) // 32..63 → 1, …, 2048..4095 → 7
		mantissa = byte(mag>>seg) & 0x0F
	}
	return (sign | seg<<4 | mantissa) ^ alawXOR
}

// DecodeULaw returns the sample of one µ-law code.
func DecodeULaw(c byte) int16 { return ulawTable[c] }

// DecodeALaw returns the sample of one A-law code.
func DecodeALaw(c byte) int16 { return alawTable[c] }

// AppendULaw appends the µ-law codes of samples to dst.
func AppendULaw(dst []byte, samples []int16) []byte {
	for _, s := range samples {
		dst = append(dst, EncodeULaw(s))
	}
	return dst
}

// AppendALaw appends the A-law codes of samples to dst.
func AppendALaw(dst []byte, samples []int16) []byte {
	for _, s := range samples {
		dst = append(dst, EncodeALaw(s))
	}
	return dst
}

// AppendULawSamples appends the samples of µ-law codes to dst. Every byte
// is a valid code, so it cannot fail.
func AppendULawSamples(dst []int16, codes []byte) []int16 {
	for _, c := range codes {
		dst = append(dst, ulawTable[c])
	}
	return dst
}

// AppendALawSamples appends the samples of A-law codes to dst.
func AppendALawSamples(dst []int16, codes []byte) []int16 {
	for _, c := range codes {
		dst = append(dst, alawTable[c])
	}
	return dst
}
