package realtime

// G.711 (ITU-T G.711): 8-bit logarithmic PCM at 8 kHz, as telephony
// bridges send and take it (audio/pcmu, audio/pcma; beta g711_ulaw,
// g711_alaw). Encoders here, and the decoders the input audio uses.

// encodeULaw encodes 16-bit samples as μ-law.
func encodeULaw(samples []int16) []byte {
	out := make([]byte, len(samples))
	for i, s := range samples {
		out[i] = ulaw(s)
	}
	return out
}

func ulaw(s int16) byte {
	const bias, clip = 0x84, 32635
	x := int(s)
	sign := 0
	if x < 0 {
		x, sign = -x, 0x80
	}
	x = min(x, clip) + bias
	exp := 7
	for mask := 0x4000; x&mask == 0 && exp > 0; mask >>= 1 {
		exp--
	}
	mant := (x >> (exp + 3)) & 0x0F
	return ^byte(sign | exp<<4 | mant)
}

// encodeALaw encodes 16-bit samples as A-law.
func encodeALaw(samples []int16) []byte {
	out := make([]byte, len(samples))
	for i, s := range samples {
		out[i] = alaw(s)
	}
	return out
}

func alaw(s int16) byte {
	x := int(s) >> 3 // A-law works on 13 bits
	sign := 0x80
	if x < 0 {
		x, sign = -x-1, 0
	}
	var b int
	if x < 32 {
		b = x >> 1
	} else {
		exp := 1
		for v := x >> 5; v > 1; v >>= 1 {
			exp++
		}
		b = exp<<4 | (x>>exp)&0x0F
	}
	return byte(b|sign) ^ 0x55
}

// decodeULaw decodes μ-law bytes into 16-bit samples.
func decodeULaw(in []byte) []int16 {
	out := make([]int16, len(in))
	for i, b := range in {
		u := ^b
		t := (int(u&0x0F)<<3 + 0x84) << ((u & 0x70) >> 4)
		if u&0x80 != 0 {
			out[i] = int16(0x84 - t)
		} else {
			out[i] = int16(t - 0x84)
		}
	}
	return out
}

// decodeALaw decodes A-law bytes into 16-bit samples.
func decodeALaw(in []byte) []int16 {
	out := make([]int16, len(in))
	for i, b := range in {
		a := b ^ 0x55
		t := int(a&0x0F) << 4
		switch seg := int(a&0x70) >> 4; seg {
		case 0:
			t += 8
		case 1:
			t += 0x108
		default:
			t = (t + 0x108) << (seg - 1)
		}
		if a&0x80 != 0 {
			out[i] = int16(t)
		} else {
			out[i] = int16(-t)
		}
	}
	return out
}
