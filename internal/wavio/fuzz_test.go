package wavio

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/go-audio/wav"
)

// fuzzMaxBytes bounds the fuzzer's inputs: the headers are what is
// interesting, and short inputs keep the fuzzer's minimisation quick.
const fuzzMaxBytes = 8 << 10

// FuzzParse feeds Parse arbitrary bytes. It must never panic; what it
// accepts must be a format with channels and a rate, and whole frames of
// sample bytes taken from the input; written back behind a canonical
// header, the same format and bytes must parse again. The input is also
// taken as 16-bit samples and round-tripped through EncodeMono16.
func FuzzParse(f *testing.F) {
	mono16 := Format{Tag: FormatPCM, Channels: 1, Rate: 16000, Bits: 16}
	canonical := append(AppendHeader(nil, mono16, 6), 1, 0, 0xff, 0xff, 0, 0x80)
	f.Add(canonical)
	f.Add(canonical[:len(canonical)-1]) // a cut last frame
	f.Add([]byte("RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00\x01\x00\x02\x00\x22\x56\x00\x00\x88\x58\x01\x00\x04\x00\x10\x00data\xff\xff\xff\xff\x01\x02\x03\x04\x05"))
	f.Add([]byte("RF64\xff\xff\xff\xffWAVEds64\x1c\x00\x00\x00" + string(make([]byte, 28)) + "fmt \x10\x00\x00\x00\x03\x00\x01\x00\x80\xbb\x00\x00\x00\xee\x02\x00\x04\x00\x20\x00data\xff\xff\xff\xff\x00\x00\x80\x3f"))
	// An odd-sized LIST chunk without its pad byte, then fmt and data.
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVELIST\x03\x00\x00\x00abcfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80\x3e\x00\x00\x02\x00\x10\x00data\x02\x00\x00\x00\x34\x12"))
	// WAVE_FORMAT_EXTENSIBLE with a float sub-format.
	ext := binary.LittleEndian.AppendUint16([]byte("RIFF\x00\x00\x00\x00WAVEfmt \x28\x00\x00\x00"), FormatExtensible)
	ext = append(ext, "\x02\x00\x44\xac\x00\x00\x20\x62\x05\x00\x08\x00\x20\x00\x16\x00\x20\x00\x03\x00\x00\x00\x03\x00\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71data\x08\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x80\xbf"...)
	f.Add(ext)
	f.Add([]byte("RIFF\x04\x00\x00\x00WAVEfmt \x0f\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzMaxBytes {
			return
		}
		format, pcm, err := Parse(data)
		if err != nil {
			if format != (Format{}) || pcm != nil {
				t.Fatalf("error %v, but also %+v and %d bytes", err, format, len(pcm))
			}
		} else {
			checkParsed(t, data, format, pcm)
		}

		samples := make([]int16, len(data)/2)
		for i := range samples {
			samples[i] = int16(binary.LittleEndian.Uint16(data[2*i:]))
		}
		rate := 1 + int(len(data))*997%192000
		file, err := EncodeMono16(samples, rate)
		if err != nil {
			t.Fatal(err)
		}
		format, pcm, err = Parse(file)
		if want := (Format{Tag: FormatPCM, Channels: 1, Rate: rate, Bits: 16}); err != nil || format != want || !bytes.Equal(pcm, data[:2*len(samples)]) {
			t.Fatalf("EncodeMono16 of %d samples at %d Hz parses as %+v, %d bytes, %v", len(samples), rate, format, len(pcm), err)
		}
	})
}

// checkParsed checks what Parse accepted.
func checkParsed(t *testing.T, data []byte, format Format, pcm []byte) {
	t.Helper()
	if format.Channels < 1 || format.Rate < 1 {
		t.Fatalf("accepted %+v", format)
	}
	// RIFF header, fmt chunk of at least 16 bytes, data chunk header.
	if len(pcm) > len(data)-44 {
		t.Fatalf("%d sample bytes from %d bytes of input", len(pcm), len(data))
	}
	if frame := format.frameSize(); frame > 0 && len(pcm)%frame != 0 {
		t.Fatalf("%d sample bytes are not whole frames of %d", len(pcm), frame)
	}
	if len(pcm) > 0 && !bytes.Contains(data, pcm) {
		t.Fatal("the sample bytes are not from the input")
	}
	if format.Channels > 0xffff || format.Bits > 0xffff || format.Tag > 0xffff {
		t.Fatalf("%+v does not fit a fmt chunk", format)
	}
	again := append(AppendHeader(nil, format, len(pcm)), pcm...)
	f2, pcm2, err := Parse(again)
	if err != nil || f2 != format || !bytes.Equal(pcm2, pcm) {
		t.Fatalf("written back as %+v with %d bytes, it parses as %+v, %d bytes, %v", format, len(pcm), f2, len(pcm2), err)
	}
	// A file that is already canonical gives its samples as they are, and
	// go-audio agrees on the format.
	if len(data) == HeaderSize+len(pcm) && bytes.Equal(data[:HeaderSize], again[:HeaderSize]) && format.Tag == FormatPCM && format.Bits == 16 {
		if !bytes.Equal(pcm, data[HeaderSize:]) {
			t.Fatal("a canonical file's samples are not its data chunk")
		}
		dec := wav.NewDecoder(bytes.NewReader(data))
		dec.ReadInfo()
		if int(dec.NumChans) != format.Channels || int(dec.SampleRate) != format.Rate {
			t.Fatalf("go-audio reads %d channels at %d Hz, Parse %+v", dec.NumChans, dec.SampleRate, format)
		}
	}
}
