package fakellm

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func speechReq(input, format string) openai.CreateSpeechRequest {
	return openai.CreateSpeechRequest{
		Model:          "tts-1",
		Input:          input,
		Voice:          "alloy",
		ResponseFormat: openai.SpeechResponseFormat(format),
	}
}

func readSpeech(t *testing.T, c *openai.Client, req openai.CreateSpeechRequest) ([]byte, string) {
	t.Helper()
	resp, err := c.CreateSpeech(testCtx(t), req)
	if err != nil {
		t.Fatalf("CreateSpeech: %v", err)
	}
	defer resp.Close()
	body, err := io.ReadAll(resp)
	if err != nil {
		t.Fatal(err)
	}
	return body, resp.Header().Get("Content-Type")
}

// samplesOf decodes 16-bit little-endian samples.
func samplesOf(pcm []byte) []int16 {
	s := make([]int16, len(pcm)/2)
	for i := range s {
		s[i] = int16(binary.LittleEndian.Uint16(pcm[2*i:]))
	}
	return s
}

func TestSpeechDefaultWAV(t *testing.T) {
	_, c := start(t, nil)
	input := "Hello there, friend."
	body, ctype := readSpeech(t, c, speechReq(input, "wav"))
	if ctype != "audio/wav" {
		t.Errorf("Content-Type = %q", ctype)
	}
	le := binary.LittleEndian
	if len(body) < 44 || string(body[:4]) != "RIFF" || string(body[8:16]) != "WAVEfmt " || string(body[36:40]) != "data" {
		t.Fatalf("not a canonical WAV: %q", body[:min(len(body), 44)])
	}
	if le.Uint32(body[4:]) != uint32(len(body)-8) || le.Uint32(body[40:]) != uint32(len(body)-44) {
		t.Error("WAV sizes do not match the data")
	}
	if le.Uint16(body[20:]) != 1 || le.Uint16(body[22:]) != 1 || le.Uint32(body[24:]) != SpeechSampleRate || le.Uint16(body[34:]) != 16 {
		t.Error("not 16-bit mono PCM at 24 kHz")
	}
	n := len(body[44:]) / 2
	if want := len([]rune(input)) * 1440; n != want {
		t.Errorf("%d samples, want %d (60 ms per rune)", n, want)
	}
	if got := time.Duration(n) * time.Second / SpeechSampleRate; got != SpeechDuration(input, 0) {
		t.Errorf("duration %v, SpeechDuration says %v", got, SpeechDuration(input, 0))
	}

	// Words differ in loudness and spaces are silent.
	s := samplesOf(body[44:])
	peak := func(rune int) int {
		p := 0
		for _, v := range s[rune*1440 : (rune+1)*1440] {
			p = max(p, abs(int(v)))
		}
		return p
	}
	hello, space, there := peak(0), peak(5), peak(6)
	if space != 0 || hello == 0 || there == 0 || hello == there {
		t.Errorf("peaks: hello %d, space %d, there %d", hello, space, there)
	}

	// Deterministic: the same request gives the same bytes.
	again, _ := readSpeech(t, c, speechReq(input, "wav"))
	if !bytes.Equal(again, body) {
		t.Error("same input, different audio")
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func TestSpeechPCMAndSpeed(t *testing.T) {
	_, c := start(t, nil)
	body, ctype := readSpeech(t, c, speechReq("abcd", "pcm"))
	if ctype != "audio/pcm" || len(body) != 4*1440*2 {
		t.Errorf("pcm: %q, %d bytes", ctype, len(body))
	}
	wavBody, _ := readSpeech(t, c, speechReq("abcd", "wav"))
	if !bytes.Equal(wavBody[44:], body) {
		t.Error("pcm body differs from the WAV's samples")
	}
	req := speechReq("abcd", "pcm")
	req.Speed = 2
	fast, _ := readSpeech(t, c, req)
	if len(fast) != len(body)/2 {
		t.Errorf("speed 2: %d bytes, want %d", len(fast), len(body)/2)
	}
	if SpeechDuration("abcd", 2) != 120*time.Millisecond {
		t.Errorf("SpeechDuration(abcd, 2) = %v", SpeechDuration("abcd", 2))
	}
}

func TestSpeechRefusesWhatOpenAIRefuses(t *testing.T) {
	s, c := start(t, nil)
	for name, req := range map[string]openai.CreateSpeechRequest{
		"no format (OpenAI's default is mp3)": speechReq("hi", ""),
		"mp3":                                 speechReq("hi", "mp3"),
		"empty input":                         speechReq("", "wav"),
		"too long":                            speechReq(strings.Repeat("a", 4097), "wav"),
		"no model":                            {Input: "hi", Voice: "alloy", ResponseFormat: "wav"},
		"no voice":                            {Model: "tts-1", Input: "hi", ResponseFormat: "wav"},
		"speed":                               {Model: "tts-1", Input: "hi", Voice: "alloy", ResponseFormat: "wav", Speed: 5},
	} {
		_, err := c.CreateSpeech(testCtx(t), req)
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusBadRequest || apiErr.Message == "" {
			t.Errorf("%s: err = %v, want an OpenAI-style 400", name, err)
		}
	}
	if n := len(s.SpeechRequests()); n != 7 {
		t.Errorf("%d requests recorded, want 7 (refused but well-formed requests are recorded)", n)
	}
	resp, err := http.Post(s.URL()+"/audio/speech", "application/json", strings.NewReader("{nope"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad JSON: status %d", resp.StatusCode)
	}
	if n := len(s.SpeechRequests()); n != 7 {
		t.Errorf("undecodable request recorded")
	}
}

func TestSpeechRequestsRecorded(t *testing.T) {
	s, c := start(t, nil)
	req := speechReq("Record me.", "wav")
	req.Speed = 1.25
	req.Voice = "nova"
	readSpeech(t, c, req)
	got := s.SpeechRequests()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	r := got[0]
	if r.Model != "tts-1" || r.Input != "Record me." || r.Voice != "nova" || r.Speed != 1.25 || r.ResponseFormat != "wav" {
		t.Errorf("recorded %+v", r)
	}
	if r.Header.Get("Authorization") != "Bearer key" || !json.Valid(r.Raw) {
		t.Errorf("header %v, raw %s", r.Header, r.Raw)
	}
	got[0].Raw[0] = 'X'
	if s.SpeechRequests()[0].Raw[0] == 'X' {
		t.Error("SpeechRequests returned shared storage")
	}
	if len(s.Requests()) != 0 {
		t.Error("speech request recorded as a chat request")
	}
	s.SetRecording(false)
	readSpeech(t, c, req)
	if n := len(s.SpeechRequests()); n != 0 {
		t.Errorf("recording off: %d kept", n)
	}
}

func TestSetSpeech(t *testing.T) {
	s, c := start(t, nil)
	s.SetSpeech(func(r SpeechRequest) SpeechReply {
		switch r.Input {
		case "401":
			return SpeechReply{Status: 401, ErrorMessage: "Incorrect API key provided"}
		case "500":
			return SpeechReply{Status: 500}
		case "99":
			return SpeechReply{Status: 99}
		case "raw":
			return SpeechReply{Body: []byte("not audio")}
		case "slow":
			return SpeechReply{Delay: 100 * time.Millisecond}
		case "panic":
			panic("boom")
		}
		return SpeechReply{}
	})
	for input, want := range map[string]int{"401": 401, "500": 500, "99": 500, "panic": 500} {
		_, err := c.CreateSpeech(testCtx(t), speechReq(input, "wav"))
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != want {
			t.Errorf("%s: err = %v, want HTTP %d", input, err, want)
		}
		if input == "401" && apiErr != nil && (apiErr.Message != "Incorrect API key provided" || apiErr.Code != "invalid_api_key") {
			t.Errorf("401 body: %+v", apiErr)
		}
	}
	if body, ctype := readSpeech(t, c, speechReq("raw", "wav")); string(body) != "not audio" || ctype != "application/octet-stream" {
		t.Errorf("raw body: %q %q", body, ctype)
	}
	began := time.Now()
	if body, _ := readSpeech(t, c, speechReq("slow", "pcm")); len(body) != 4*1440*2 {
		t.Errorf("delayed reply: %d bytes", len(body))
	}
	if d := time.Since(began); d < 100*time.Millisecond {
		t.Errorf("delay not applied: %v", d)
	}
	s.SetSpeech(nil)
	if body, _ := readSpeech(t, c, speechReq("raw", "pcm")); len(body) != 3*1440*2 {
		t.Error("SetSpeech(nil) did not restore the default")
	}
}

func TestSpeechDisconnects(t *testing.T) {
	for _, reply := range []SpeechReply{{Hang: true}, {Delay: time.Minute}} {
		s, c := start(t, nil)
		s.SetSpeech(func(SpeechRequest) SpeechReply { return reply })
		cancelInFlight(t, s, reply.Hang, func(ctx context.Context) error {
			resp, err := c.CreateSpeech(ctx, speechReq("hi", "wav"))
			if err == nil {
				_, err = io.ReadAll(resp)
				resp.Close()
			}
			return err
		})
	}
}

func TestCloseWithHangingSpeech(t *testing.T) {
	s, err := Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetSpeech(func(SpeechRequest) SpeechReply { return SpeechReply{Hang: true} })
	go func() {
		resp, err := http.Post(s.URL()+"/audio/speech", "application/json", strings.NewReader(`{"model":"m","voice":"v","input":"hi","response_format":"wav"}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	if !s.WaitActive(guard) {
		t.Fatal("the request never reached the server")
	}
	closeWhileHanging(t, s, "speech")
}

func TestSpeechToneLevels(t *testing.T) {
	// Every rune of a word sounds at that word's level (13.2 periods of
	// the tone per rune, so RMS varies a little); spaces are silent.
	pcm := tone("a bb", 1440)
	s := samplesOf(pcm)
	level := func(from, to int) float64 {
		var sum float64
		for _, v := range s[from:to] {
			sum += float64(v) * float64(v)
		}
		return math.Sqrt(sum / float64(to-from))
	}
	a, gap, b1, b2 := level(0, 1440), level(1440, 2880), level(2880, 4320), level(4320, 5760)
	if gap != 0 || a == 0 || math.Abs(b1-b2) > 0.05*b1 || math.Abs(a-b1) < 1000 {
		t.Errorf("levels: a %.0f, gap %.0f, b %.0f/%.0f", a, gap, b1, b2)
	}
}
