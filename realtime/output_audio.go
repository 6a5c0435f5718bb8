package realtime

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"

	"koe/asr"
	"koe/internal/wavio"
	"koe/tts"
)

// koe speaks a reply a sentence at a time, each a complete WAV at the
// engine's rate. A Realtime client takes one stream in the session's
// output format: each sentence is decoded, resampled to that format's
// rate (24 kHz PCM, or 8 kHz G.711), encoded and cut into deltas.

// deltaMillis is the length of one audio delta: short enough that a
// client starts playing soon and a cancel drops most of a sentence, long
// enough that the base64 and the JSON around it stay a small share.
const deltaMillis = 200

// audioEncoder turns one response's sentences into audio deltas. encode
// runs in the goroutine that sends the turn's audio; sent, written and
// heard run under the Conn's lock.
type audioEncoder struct {
	format audioFormat
	// The sentences' transcripts in order, and how many of them the
	// client has been written whole.
	pieces []string
	done   int
}

func newAudioEncoder(f audioFormat) *audioEncoder { return &audioEncoder{format: f} }

// encode turns one sentence's WAV (base64, as the audio frame holds it)
// into the base64 deltas of the output format.
func (e *audioEncoder) encode(b64 string) ([]string, error) {
	wav, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("decode the sentence's base64: %w", err)
	}
	samples, rate, err := wavSamples(wav)
	if err != nil {
		return nil, fmt.Errorf("read the sentence's WAV: %w", err)
	}
	if rate != e.format.rate {
		rs, err := asr.NewResampler(rate, e.format.rate)
		if err != nil {
			return nil, fmt.Errorf("resample %d Hz to %d Hz: %w", rate, e.format.rate, err)
		}
		// Each sentence is a stream of its own: the filter's tail is
		// flushed at its end, so nothing of it is lost.
		samples = append(rs.Process(samples), rs.Flush()...)
	}
	per := e.format.rate * deltaMillis / 1000
	out := make([]string, 0, (len(samples)+per-1)/per)
	for len(samples) > 0 {
		n := min(per, len(samples))
		out = append(out, base64.StdEncoding.EncodeToString(e.format.encode(nil, samples[:n])))
		samples = samples[n:]
	}
	return out, nil
}

// wavSamples reads a sentence's WAV. koe's speech frames hold 16-bit mono
// PCM (tts normalised them): its samples are read as they are, without
// building another WAV; anything else goes through tts.Normalize.
func wavSamples(wav []byte) ([]int16, int, error) {
	f, pcm, err := wavio.Parse(wav)
	if err == nil && f.Tag == wavio.FormatPCM && f.Channels == 1 && f.Bits == 16 {
		samples := make([]int16, len(pcm)/2)
		for i := range samples {
			samples[i] = int16(binary.LittleEndian.Uint16(pcm[2*i:]))
		}
		return samples, f.Rate, nil
	}
	a, err := tts.Normalize(wav)
	if err != nil {
		return nil, 0, err
	}
	return a.Samples, a.SampleRate, nil
}

// sent notes a sentence going out and returns its number.
func (e *audioEncoder) sent(text string) int {
	e.pieces = append(e.pieces, text)
	return len(e.pieces)
}

// written notes that sentence n was written whole (sentences are written
// in order).
func (e *audioEncoder) written(n int) { e.done = max(e.done, n) }

// heard is the transcript of the sentences written whole.
func (e *audioEncoder) heard() string { return strings.Join(e.pieces[:e.done], "") }
