package fakellm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"koe/internal/wavio"
)

// The synthetic speech the speech endpoint produces by default: a 220 Hz
// tone, SpeechRuneDuration per rune of input (divided by the requested
// speed), at SpeechSampleRate, 16-bit mono. Each word has its own loudness
// and whitespace is silent, so volume envelopes computed from it are not
// flat, as they would not be for real speech.
const (
	SpeechSampleRate   = 24000
	SpeechRuneDuration = 60 * time.Millisecond
	speechToneHz       = 220
	// speechMaxInput mirrors OpenAI's limit on input length.
	speechMaxInput = 4096
)

// speechWordAmplitudes are the per-word loudnesses, cycled through.
var speechWordAmplitudes = [...]float64{0.3, 0.9, 0.5, 0.7, 0.45}

// SpeechRequest is a decoded POST /v1/audio/speech body.
type SpeechRequest struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          string  `json:"voice"`
	Speed          float64 `json:"speed"` // 0 when the client left it out
	ResponseFormat string  `json:"response_format"`
	// Raw is the raw request body, for assertions on fields not decoded here.
	Raw    []byte      `json:"-"`
	Header http.Header `json:"-"`
}

// SpeechReply decides what the server answers to one speech request. The
// zero value is the default: synthetic speech for the request.
type SpeechReply struct {
	// Status, if != 0 and != 200, answers with this HTTP status and an
	// OpenAI-style error body (values net/http cannot send become 500).
	Status int
	// ErrorMessage is the message for the error body; defaults to the
	// status text.
	ErrorMessage string
	// Delay is waited before answering (simulates synthesis time); a
	// client leaving during it is reported on Disconnects.
	Delay time.Duration
	// Hang sends the response headers and then blocks until the client
	// goes away (or the server is closed).
	Hang bool
	// Body, if non-nil, is sent as is (200, Content-Type
	// application/octet-stream) instead of synthetic speech, e.g. to serve
	// a malformed file or a real engine's WAV.
	Body []byte
	// Flood, if set (and Status is not), is the whole answer instead: a
	// hostile or broken server's answer of any size (see Flood).
	Flood *Flood
	// Stream, if set, sends the synthetic speech as a streaming engine
	// does, paced (see SpeechStream).
	Stream *SpeechStream
}

// SetSpeech makes respond decide the answer to each speech request; nil
// restores the default. respond may be called concurrently.
func (s *Server) SetSpeech(respond func(SpeechRequest) SpeechReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.speechRespond = respond
}

// SpeechRequests returns copies of all speech requests received so far, in
// arrival order. Requests whose body could not be decoded are not recorded.
func (s *Server) SpeechRequests() []SpeechRequest { return recorded(s, &s.speechRequests) }

// SpeechDuration is how long the default synthetic speech for input at
// speed lasts (speed 0 means 1, as for a request that leaves it out).
func SpeechDuration(input string, speed float64) time.Duration {
	n := utf8.RuneCountInString(input) * speechSamplesPerRune(speed)
	return time.Duration(n) * time.Second / SpeechSampleRate
}

func speechSamplesPerRune(speed float64) int {
	if speed == 0 {
		speed = 1
	}
	return int(math.Round(SpeechRuneDuration.Seconds() * SpeechSampleRate / speed))
}

func (r SpeechReply) held() (bool, time.Duration, int, string) {
	return r.Hang, r.Delay, r.Status, r.ErrorMessage
}

func (r SpeechRequest) clone() SpeechRequest {
	c := r
	c.Raw = append([]byte(nil), r.Raw...)
	c.Header = r.Header.Clone()
	return c
}

func (s *Server) speech(w http.ResponseWriter, r *http.Request) {
	if !s.begin(w) {
		return
	}
	defer s.end()

	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req SpeechRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	req.Raw = body
	req.Header = r.Header.Clone()

	reply, c, ok := answerHeld(s, w, r, &s.speechRequests, &s.speechRespond, "speech responder", req, "application/octet-stream")
	if !ok {
		return
	}
	if reply.Flood != nil {
		c.flood(reply.Flood)
		return
	}

	contentType := "application/octet-stream"
	out := reply.Body
	if out == nil {
		var msg string
		out, contentType, msg = synthesize(req)
		if msg != "" {
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		if reply.Stream != nil {
			wav := req.ResponseFormat == "wav"
			if wav {
				out = out[wavio.HeaderSize:]
			}
			c.streamSpeech(*reply.Stream, out, contentType, wav)
			return
		}
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	c.write(out)
}

// synthesize produces the default answer, or a message for a 400 when the
// request is one OpenAI would refuse (so client bugs show up here first).
func synthesize(req SpeechRequest) (body []byte, contentType, errMsg string) {
	switch {
	case req.Model == "":
		return nil, "", "you must provide a model parameter"
	case req.Voice == "":
		return nil, "", "you must provide a voice parameter"
	case req.Input == "":
		return nil, "", "input must not be empty"
	case utf8.RuneCountInString(req.Input) > speechMaxInput:
		return nil, "", fmt.Sprintf("input is longer than %d characters", speechMaxInput)
	case req.Speed != 0 && !(req.Speed >= 0.25 && req.Speed <= 4):
		return nil, "", fmt.Sprintf("speed %g is out of range: 0.25 to 4.0", req.Speed)
	}
	pcm := tone(req.Input, speechSamplesPerRune(req.Speed))
	switch req.ResponseFormat {
	case "wav":
		return wavFile(pcm), "audio/wav", ""
	case "pcm":
		return pcm, "audio/pcm", ""
	case "":
		return nil, "", "fakellm: response_format must be wav or pcm (OpenAI's default is mp3, which fakellm cannot produce)"
	}
	return nil, "", fmt.Sprintf("fakellm: response_format %q is not supported: use wav or pcm", req.ResponseFormat)
}

// tone renders the synthetic speech as 16-bit little-endian samples.
func tone(input string, perRune int) []byte {
	pcm := make([]byte, 0, 2*perRune*utf8.RuneCountInString(input))
	t, word := 0, -1
	inWord := false
	for _, r := range input {
		amp := 0.0
		if !unicode.IsSpace(r) {
			if !inWord {
				word++
			}
			amp = speechWordAmplitudes[word%len(speechWordAmplitudes)]
		}
		inWord = amp != 0
		for range perRune {
			v := amp * math.MaxInt16 * math.Sin(2*math.Pi*speechToneHz*float64(t)/SpeechSampleRate)
			pcm = binary.LittleEndian.AppendUint16(pcm, uint16(int16(math.Round(v))))
			t++
		}
	}
	return pcm
}

// wavFile wraps 16-bit mono samples in a canonical WAV header.
func wavFile(pcm []byte) []byte {
	f := wavio.Format{Tag: wavio.FormatPCM, Channels: 1, Rate: SpeechSampleRate, Bits: 16}
	return append(wavio.AppendHeader(make([]byte, 0, wavio.HeaderSize+len(pcm)), f, len(pcm)), pcm...)
}
