package wavio

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/go-audio/wav"
)

func TestEncodeMono16(t *testing.T) {
	ramp := make([]int16, 20000) // more than one encoder chunk
	for i := range ramp {
		ramp[i] = int16(i*7 - 70000/2)
	}
	ramp[0], ramp[1] = math.MinInt16, math.MaxInt16
	for _, tc := range []struct {
		name    string
		samples []int16
		rate    int
	}{
		{"empty", nil, 16000},
		{"short", []int16{0, 1, -1, 32767, -32768}, 16000},
		{"long at 22050", ramp, 22050},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeMono16(tc.samples, tc.rate)
			if err != nil {
				t.Fatal(err)
			}
			if want := 44 + 2*len(tc.samples); len(b) != want {
				t.Fatalf("%d bytes, want %d (canonical header + data)", len(b), want)
			}
			le := binary.LittleEndian
			if riffSize := le.Uint32(b[4:8]); int(riffSize) != len(b)-8 {
				t.Errorf("RIFF size %d, want %d", riffSize, len(b)-8)
			}
			if string(b[36:40]) != "data" || int(le.Uint32(b[40:44])) != 2*len(tc.samples) {
				t.Errorf("data chunk header %q %d, want \"data\" %d", b[36:40], le.Uint32(b[40:44]), 2*len(tc.samples))
			}

			dec := wav.NewDecoder(bytes.NewReader(b))
			if !dec.IsValidFile() {
				t.Fatal("go-audio does not take it for a valid WAV")
			}
			if dec.SampleRate != uint32(tc.rate) || dec.NumChans != 1 || dec.BitDepth != 16 || dec.WavAudioFormat != 1 {
				t.Errorf("format %d Hz, %d channels, %d bits, tag %d; want %d Hz mono 16-bit PCM",
					dec.SampleRate, dec.NumChans, dec.BitDepth, dec.WavAudioFormat, tc.rate)
			}
			if len(tc.samples) == 0 {
				return
			}
			buf, err := dec.FullPCMBuffer()
			if err != nil {
				t.Fatal(err)
			}
			if len(buf.Data) != len(tc.samples) {
				t.Fatalf("decoded %d samples, want %d", len(buf.Data), len(tc.samples))
			}
			for i, v := range buf.Data {
				if int16(v) != tc.samples[i] {
					t.Fatalf("sample %d decodes to %d, want %d", i, v, tc.samples[i])
				}
			}
		})
	}
}

// TestParseReadsEncoded checks that Parse and AppendHeader agree with the
// encoder: the header AppendHeader writes is the encoder's, and Parse finds
// the format and samples again.
func TestParseReadsEncoded(t *testing.T) {
	samples := []int16{0, 1, -1, 32767, -32768, 1234}
	b, err := EncodeMono16(samples, 22050)
	if err != nil {
		t.Fatal(err)
	}
	mono16 := Format{Tag: FormatPCM, Channels: 1, Rate: 22050, Bits: 16}
	if h := AppendHeader(nil, mono16, 2*len(samples)); !bytes.Equal(h, b[:HeaderSize]) {
		t.Errorf("AppendHeader wrote %q, the encoder %q", h, b[:HeaderSize])
	}
	f, pcm, err := Parse(b)
	if err != nil || f != mono16 || !bytes.Equal(pcm, b[HeaderSize:]) {
		t.Errorf("Parse = %+v, %d bytes, %v; want %+v and the %d sample bytes", f, len(pcm), err, mono16, len(b)-HeaderSize)
	}
	// A trailing chunk is not audio, and a cut last frame is dropped.
	stereo := Format{Tag: FormatPCM, Channels: 2, Rate: 8000, Bits: 24}
	data := make([]byte, 6*3)
	file := append(AppendHeader(nil, stereo, len(data)), data...)
	file = append(file, "LIST\x04\x00\x00\x00INFO"...)
	if f, pcm, err := Parse(file); err != nil || f != stereo || len(pcm) != len(data) {
		t.Errorf("trailing chunk: %+v, %d bytes, %v", f, len(pcm), err)
	}
	if _, pcm, err := Parse(file[:HeaderSize+len(data)-1]); err != nil || len(pcm) != 6*2 {
		t.Errorf("cut last frame: %d bytes, %v; want 12", len(pcm), err)
	}
}

func TestParseErrors(t *testing.T) {
	mono16 := Format{Tag: FormatPCM, Channels: 1, Rate: 16000, Bits: 16}
	header := AppendHeader(nil, mono16, 0)
	chunk := func(id string, body []byte) []byte {
		return append(binary.LittleEndian.AppendUint32([]byte(id), uint32(len(body))), body...)
	}
	riff := func(chunks ...[]byte) []byte {
		b := []byte("RIFF\x00\x00\x00\x00WAVE")
		for _, c := range chunks {
			b = append(b, c...)
		}
		return b
	}
	fmtBody := header[20:36]
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"not RIFF":        {[]byte("ID3\x04 an mp3, perhaps"), "no RIFF/WAVE header"},
		"header only":     {riff(), "no fmt chunk"},
		"data before fmt": {riff(chunk("data", []byte{1, 2})), "before any fmt"},
		"no data":         {riff(chunk("fmt ", fmtBody)), "no data chunk"},
		"cut fmt":         {riff(chunk("fmt ", fmtBody[:4])), "truncated"},
		"zero channels":   {riff(chunk("fmt ", append([]byte{1, 0, 0, 0}, fmtBody[4:]...)), chunk("data", nil)), "0 channels"},
	} {
		if _, _, err := Parse(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", name, err, tc.want)
		}
	}
}
