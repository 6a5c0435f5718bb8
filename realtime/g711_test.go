package realtime

import "testing"

// G.711 keeps a sample within its segment's step: the decoders give back
// each encoded sample to within 1/16 of its size (plus the quietest step),
// across the whole 16-bit range, and silence stays near silence.
func TestG711RoundTrip(t *testing.T) {
	var in []int16
	for v := -32768; v <= 32767; v += 7 {
		in = append(in, int16(v))
	}
	for name, codec := range map[string]struct {
		enc func([]int16) []byte
		dec func([]byte) []int16
	}{"ulaw": {encodeULaw, decodeULaw}, "alaw": {encodeALaw, decodeALaw}} {
		out := codec.dec(codec.enc(in))
		for i, v := range in {
			diff := int(out[i]) - int(v)
			if diff < 0 {
				diff = -diff
			}
			mag := int(v)
			if mag < 0 {
				mag = -mag
			}
			if diff > mag/16+64 {
				t.Fatalf("%s: %d came back as %d", name, v, out[i])
			}
		}
		if s := codec.dec(codec.enc([]int16{0}))[0]; s > 16 || s < -16 {
			t.Errorf("%s: silence came back as %d", name, s)
		}
	}
}
