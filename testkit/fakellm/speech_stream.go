package fakellm

import (
	"net/http"
	"time"

	"koe/internal/wavio"
)

// Defaults of a streamed speech answer: a local neural engine on a GPU
// answers in about 150 ms and then synthesises several times faster than
// real time.
const (
	DefaultSpeechTTFB  = 150 * time.Millisecond
	DefaultSpeechPace  = 5.0
	DefaultSpeechChunk = 40 * time.Millisecond
)

// SpeechStream makes a speech answer arrive as a streaming engine sends
// it: the response headers at once, the first audio after TTFB, then the
// rest in chunks of Chunk of audio, each sent once the engine would have
// synthesised it at Pace times real time. A WAV answer starts with a
// header whose sizes are placeholders, as a streaming writer's are.
type SpeechStream struct {
	TTFB  time.Duration // 0: DefaultSpeechTTFB
	Pace  float64       // times real time; 0: DefaultSpeechPace
	Chunk time.Duration // 0: DefaultSpeechChunk
}

// RealisticSpeech answers every speech request with the default synthetic
// speech, streamed at the default pace.
func RealisticSpeech(SpeechRequest) SpeechReply {
	return SpeechReply{Stream: &SpeechStream{}}
}

func (st SpeechStream) withDefaults() SpeechStream {
	if st.TTFB == 0 {
		st.TTFB = DefaultSpeechTTFB
	}
	if st.Pace <= 0 {
		st.Pace = DefaultSpeechPace
	}
	if st.Chunk <= 0 {
		st.Chunk = DefaultSpeechChunk
	}
	return st
}

// streamSpeech sends pcm (16-bit mono at SpeechSampleRate) paced by st,
// behind a streaming WAV header when wav is set. It stops when the client
// goes away.
func (c *call) streamSpeech(st SpeechStream, pcm []byte, contentType string, wav bool) {
	st = st.withDefaults()
	c.w.Header().Set("Content-Type", contentType)
	c.w.WriteHeader(http.StatusOK)
	if c.write(nil) != proceed {
		return
	}
	start := time.Now()
	if wav {
		f := wavio.Format{Tag: wavio.FormatPCM, Channels: 1, Rate: SpeechSampleRate, Bits: 16}
		head := wavio.AppendHeader(make([]byte, 0, wavio.HeaderSize), f, 0)
		// The placeholders espeak-ng writes to a pipe.
		copy(head[4:8], []byte{0x24, 0xf0, 0xff, 0x7f})
		copy(head[40:44], []byte{0x00, 0xf0, 0xff, 0x7f})
		if c.wait(st.TTFB) != proceed || c.write(head) != proceed {
			return
		}
	}
	chunk := 2 * int(st.Chunk.Seconds()*SpeechSampleRate)
	chunk = max(2, chunk)
	for off := 0; off < len(pcm); off += chunk {
		end := min(off+chunk, len(pcm))
		// Ready once the engine has made it: the first chunk at TTFB,
		// then each at the pace after that.
		audio := time.Duration(end/2) * time.Second / SpeechSampleRate
		ready := st.TTFB + time.Duration(float64(audio)/st.Pace)
		if off == 0 {
			ready = st.TTFB
		}
		if c.wait(time.Until(start.Add(ready))) != proceed || c.write(pcm[off:end]) != proceed {
			return
		}
	}
}
