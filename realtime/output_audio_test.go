package realtime

import (
	"encoding/binary"
	"testing"

	"koe/internal/wavio"
)

// A sentence's WAV is read as koe's speech frames hold it (16-bit mono,
// taken as it is) and in any other form tts reads (here stereo, averaged
// down to mono).
func TestWAVSamples(t *testing.T) {
	mono := wavio.AppendHeader(nil, wavio.Format{Tag: wavio.FormatPCM, Channels: 1, Rate: 22050, Bits: 16}, 4)
	mono = binary.LittleEndian.AppendUint16(mono, uint16(1000))
	mono = binary.LittleEndian.AppendUint16(mono, uint16(0xFC18)) // -1000
	s, rate, err := wavSamples(mono)
	if err != nil || rate != 22050 || len(s) != 2 || s[0] != 1000 || s[1] != -1000 {
		t.Errorf("mono: %v at %d Hz, %v", s, rate, err)
	}
	stereo := wavio.AppendHeader(nil, wavio.Format{Tag: wavio.FormatPCM, Channels: 2, Rate: 16000, Bits: 16}, 4)
	stereo = binary.LittleEndian.AppendUint16(stereo, 3000)
	stereo = binary.LittleEndian.AppendUint16(stereo, 1000)
	s, rate, err = wavSamples(stereo)
	if err != nil || rate != 16000 || len(s) != 1 || s[0] != 2000 {
		t.Errorf("stereo: %v at %d Hz, %v; want one sample of 2000", s, rate, err)
	}
	if _, _, err := wavSamples([]byte("not a wav")); err == nil {
		t.Error("garbage read as a WAV")
	}
}
