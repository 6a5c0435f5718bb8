package realtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"koe/asr"
	"koe/internal/g711"
)

// Encoding is how an audio format writes samples as bytes.
type Encoding int

const (
	// EncodingPCM16 is signed 16-bit little-endian mono PCM: the beta
	// "pcm16", GA {"type":"audio/pcm","rate":24000}.
	EncodingPCM16 Encoding = iota + 1
	// EncodingULaw is G.711 µ-law at 8 kHz: "g711_ulaw", "audio/pcmu".
	EncodingULaw
	// EncodingALaw is G.711 A-law at 8 kHz: "g711_alaw", "audio/pcma".
	EncodingALaw
)

// The API's rates: PCM is 24 kHz unless a GA format names another rate
// (koe resamples any of asr.SupportedRates), G.711 always 8 kHz.
const (
	pcmDefaultRate = 24000
	g711Rate       = 8000
)

// AudioFormat is an input or output audio format of a session.
type AudioFormat struct {
	Encoding Encoding
	Rate     int // Hz
}

// DefaultAudioFormat is the API's default for input and output: 24 kHz
// pcm16.
var DefaultAudioFormat = AudioFormat{Encoding: EncodingPCM16, Rate: pcmDefaultRate}

// gaAudioFormat is the GA API's object form of a format.
type gaAudioFormat struct {
	Type string `json:"type"`
	Rate int    `json:"rate,omitempty"`
}

// ParseAudioFormat reads a format as either API version writes it: the
// beta's name ("pcm16", "g711_ulaw", "g711_alaw") or the GA's object
// ({"type":"audio/pcm","rate":24000}, {"type":"audio/pcmu"},
// {"type":"audio/pcma"}). A GA PCM format may name any rate koe resamples
// (asr.SupportedRates); the API itself only defines 24000. The error says
// what is accepted, for an error event.
func ParseAudioFormat(raw json.RawMessage) (AudioFormat, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return AudioFormat{}, fmt.Errorf("audio format: %w", err)
		}
		switch name {
		case "pcm16":
			return DefaultAudioFormat, nil
		case "g711_ulaw":
			return AudioFormat{Encoding: EncodingULaw, Rate: g711Rate}, nil
		case "g711_alaw":
			return AudioFormat{Encoding: EncodingALaw, Rate: g711Rate}, nil
		}
		return AudioFormat{}, fmt.Errorf("audio format %q is not supported; use pcm16, g711_ulaw or g711_alaw", clip(name))
	}
	var ga gaAudioFormat
	if err := json.Unmarshal(raw, &ga); err != nil {
		return AudioFormat{}, fmt.Errorf("audio format must be a name (pcm16, g711_ulaw, g711_alaw) or an object with a type (audio/pcm, audio/pcmu, audio/pcma): %w", err)
	}
	switch ga.Type {
	case "audio/pcm":
		if ga.Rate == 0 {
			return DefaultAudioFormat, nil
		}
		if err := asr.CheckRate(ga.Rate); err != nil {
			return AudioFormat{}, fmt.Errorf("audio format audio/pcm: %w", err)
		}
		return AudioFormat{Encoding: EncodingPCM16, Rate: ga.Rate}, nil
	case "audio/pcmu", "audio/pcma":
		if ga.Rate != 0 && ga.Rate != g711Rate {
			return AudioFormat{}, fmt.Errorf("audio format %s is 8000 Hz, not %d", ga.Type, ga.Rate)
		}
		if ga.Type == "audio/pcmu" {
			return AudioFormat{Encoding: EncodingULaw, Rate: g711Rate}, nil
		}
		return AudioFormat{Encoding: EncodingALaw, Rate: g711Rate}, nil
	}
	return AudioFormat{}, fmt.Errorf("audio format type %q is not supported; use audio/pcm, audio/pcmu or audio/pcma", clip(ga.Type))
}

// clip bounds a client's string quoted back in an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// BetaName is the format's name in the beta API.
func (f AudioFormat) BetaName() string {
	switch f.Encoding {
	case EncodingULaw:
		return "g711_ulaw"
	case EncodingALaw:
		return "g711_alaw"
	}
	return "pcm16"
}

// MarshalGA is the format as the GA API writes it.
func (f AudioFormat) MarshalGA() json.RawMessage {
	var v gaAudioFormat
	switch f.Encoding {
	case EncodingULaw:
		v.Type = "audio/pcmu"
	case EncodingALaw:
		v.Type = "audio/pcma"
	default:
		v = gaAudioFormat{Type: "audio/pcm", Rate: f.Rate}
	}
	b, _ := json.Marshal(v) // two plain fields: cannot fail
	return b
}

// bytesPerSample is 2 for PCM, 1 for G.711.
func (f AudioFormat) bytesPerSample() int {
	if f.Encoding == EncodingPCM16 {
		return 2
	}
	return 1
}

// Millis is how long n bytes of the format play, in whole milliseconds
// (rounded down).
func (f AudioFormat) Millis(n int) int {
	return int(int64(n) * 1000 / int64(f.Rate*f.bytesPerSample()))
}

// Bytes is how many bytes ms milliseconds of the format take, whole
// samples (rounded down).
func (f AudioFormat) Bytes(ms int) int {
	return int(int64(ms)*int64(f.Rate)/1000) * f.bytesPerSample()
}

// Encode appends samples at the format's rate, written in its encoding,
// to dst.
func (f AudioFormat) Encode(dst []byte, samples []int16) []byte {
	switch f.Encoding {
	case EncodingULaw:
		return g711.AppendULaw(dst, samples)
	case EncodingALaw:
		return g711.AppendALaw(dst, samples)
	}
	dst = slices.Grow(dst, 2*len(samples))
	for _, s := range samples {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(s))
	}
	return dst
}

// Decode appends the samples of whole samples' bytes b to dst and returns
// the bytes of a sample cut at the end of b (an odd byte of PCM), which
// the next chunk completes. Every byte of G.711 is a sample.
func (f AudioFormat) Decode(dst []int16, b []byte) ([]int16, []byte) {
	switch f.Encoding {
	case EncodingULaw:
		return g711.AppendULawSamples(dst, b), nil
	case EncodingALaw:
		return g711.AppendALawSamples(dst, b), nil
	}
	n := len(b) / 2
	dst = slices.Grow(dst, n)
	for i := range n {
		dst = append(dst, int16(binary.LittleEndian.Uint16(b[2*i:])))
	}
	return dst, b[2*n:]
}

// OutputEncoder turns the speech koe synthesises (16-bit samples at the
// engine's rate, piece after piece) into the session's output format:
// resampled to the format's rate as one continuous stream, then encoded.
// One belongs to one response's audio; it is not safe for concurrent use.
type OutputEncoder struct {
	format AudioFormat
	from   int
	res    *asr.Resampler
}

// NewOutputEncoder returns an encoder to format.
func NewOutputEncoder(format AudioFormat) *OutputEncoder {
	return &OutputEncoder{format: format}
}

// Encode appends the next piece of speech, samples at rate Hz, in the
// output format to dst. The resampler holds back a few milliseconds
// across pieces (its filter's reach), which Flush releases; a piece at a
// different rate than the last first flushes the last. A rate the
// resampler does not take gives its error.
func (e *OutputEncoder) Encode(dst []byte, samples []int16, rate int) ([]byte, error) {
	if rate != e.from || e.res == nil {
		dst = e.flush(dst)
		res, err := asr.NewResampler(rate, e.format.Rate)
		if err != nil {
			return dst, fmt.Errorf("speech at %d Hz to %d Hz: %w", rate, e.format.Rate, err)
		}
		e.from, e.res = rate, res
	}
	return e.format.Encode(dst, e.res.Process(samples)), nil
}

// Flush appends what the resampler still holds (the end of the speech) to
// dst and starts a new stream.
func (e *OutputEncoder) Flush(dst []byte) []byte { return e.flush(dst) }

func (e *OutputEncoder) flush(dst []byte) []byte {
	if e.res == nil {
		return dst
	}
	return e.format.Encode(dst, e.res.Flush())
}
