package fakellm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// fakeWAV is any bytes: the fake does not decode the audio.
var fakeWAV = []byte("RIFF\x24\x00\x00\x00WAVEfmt some audio")

func transcriptionReq(prompt string) openai.AudioRequest {
	return openai.AudioRequest{
		Model:    openai.Whisper1,
		FilePath: "audio.wav",
		Reader:   bytes.NewReader(fakeWAV),
		Prompt:   prompt,
		Format:   openai.AudioResponseFormatJSON,
	}
}

func TestTranscriptionDefault(t *testing.T) {
	s, c := start(t, nil)
	resp, err := c.CreateTranscription(testCtx(t), transcriptionReq(""))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != DefaultTranscription {
		t.Errorf("text = %q", resp.Text)
	}
	if len(s.Requests()) != 0 || len(s.SpeechRequests()) != 0 {
		t.Error("transcription recorded as a chat or speech request")
	}
}

func TestTranscriptionRequestsRecorded(t *testing.T) {
	s, c := start(t, nil)
	req := transcriptionReq("Koe, Ollama, Live2D.")
	req.Language = "de"
	if _, err := c.CreateTranscription(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	got := s.TranscriptionRequests()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	r := got[0]
	if r.Model != "whisper-1" || r.Language != "de" || r.Prompt != "Koe, Ollama, Live2D." || r.ResponseFormat != "json" || r.Filename != "audio.wav" {
		t.Errorf("recorded %+v", r)
	}
	if r.AudioBytes != len(fakeWAV) || !bytes.Equal(r.Audio, fakeWAV) {
		t.Errorf("audio: %d bytes %q", r.AudioBytes, r.Audio)
	}
	if r.Header.Get("Authorization") != "Bearer key" || !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		t.Errorf("header %v", r.Header)
	}
	got[0].Audio[0] = 'X'
	if s.TranscriptionRequests()[0].Audio[0] == 'X' {
		t.Error("TranscriptionRequests returned shared storage")
	}
	s.SetRecording(false)
	if _, err := c.CreateTranscription(testCtx(t), transcriptionReq("")); err != nil {
		t.Fatal(err)
	}
	if n := len(s.TranscriptionRequests()); n != 0 {
		t.Errorf("recording off: %d kept", n)
	}
}

func TestTranscriptionFormats(t *testing.T) {
	s, c := start(t, nil)
	s.SetTranscription(func(TranscriptionRequest) TranscriptionReply {
		return TranscriptionReply{Text: "  spaced out  "}
	})
	for _, format := range []openai.AudioResponseFormat{openai.AudioResponseFormatText, openai.AudioResponseFormatVerboseJSON} {
		req := transcriptionReq("")
		req.Format = format
		req.Language = "en"
		resp, err := c.CreateTranscription(testCtx(t), req)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if !strings.Contains(resp.Text, "spaced out") {
			t.Errorf("%s: text %q", format, resp.Text)
		}
		if format == openai.AudioResponseFormatVerboseJSON && (resp.Task != "transcribe" || resp.Language != "en") {
			t.Errorf("verbose_json: %+v", resp)
		}
	}
	req := transcriptionReq("")
	req.Format = openai.AudioResponseFormatSRT
	var apiErr *openai.APIError
	if _, err := c.CreateTranscription(testCtx(t), req); !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 {
		t.Errorf("srt: err = %v, want HTTP 400", err)
	}
}

func TestSetTranscription(t *testing.T) {
	s, c := start(t, nil)
	s.SetTranscription(func(r TranscriptionRequest) TranscriptionReply {
		switch r.Prompt {
		case "401":
			return TranscriptionReply{Status: 401, ErrorMessage: "Incorrect API key provided"}
		case "500":
			return TranscriptionReply{Status: 500}
		case "99":
			return TranscriptionReply{Status: 99}
		case "panic":
			panic("boom")
		case "empty":
			return TranscriptionReply{Empty: true}
		case "slow":
			return TranscriptionReply{Text: "slow words", Delay: 100 * time.Millisecond}
		}
		return TranscriptionReply{Text: "you said " + r.Prompt}
	})
	for prompt, want := range map[string]int{"401": 401, "500": 500, "99": 500, "panic": 500} {
		_, err := c.CreateTranscription(testCtx(t), transcriptionReq(prompt))
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != want {
			t.Errorf("%s: err = %v, want HTTP %d", prompt, err, want)
		}
		if prompt == "401" && apiErr != nil && (apiErr.Message != "Incorrect API key provided" || apiErr.Code != "invalid_api_key") {
			t.Errorf("401 body: %+v", apiErr)
		}
	}
	if resp, err := c.CreateTranscription(testCtx(t), transcriptionReq("empty")); err != nil || resp.Text != "" {
		t.Errorf("empty: %q, %v", resp.Text, err)
	}
	if resp, err := c.CreateTranscription(testCtx(t), transcriptionReq("hi")); err != nil || resp.Text != "you said hi" {
		t.Errorf("scripted: %q, %v", resp.Text, err)
	}
	began := time.Now()
	if resp, err := c.CreateTranscription(testCtx(t), transcriptionReq("slow")); err != nil || resp.Text != "slow words" {
		t.Errorf("delayed: %q, %v", resp.Text, err)
	}
	if d := time.Since(began); d < 100*time.Millisecond {
		t.Errorf("delay not applied: %v", d)
	}
	s.SetTranscription(nil)
	if resp, err := c.CreateTranscription(testCtx(t), transcriptionReq("hi")); err != nil || resp.Text != DefaultTranscription {
		t.Errorf("SetTranscription(nil) did not restore the default: %q, %v", resp.Text, err)
	}
}

// TestTranscriptionRefusesWhatOpenAIRefuses sends forms go-openai would
// never build, so client bugs show up against the fake first.
func TestTranscriptionRefusesWhatOpenAIRefuses(t *testing.T) {
	s, _ := start(t, nil)
	form := func(fields map[string]string, file []byte) (io.Reader, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for k, v := range fields {
			_ = mw.WriteField(k, v)
		}
		if file != nil {
			fw, _ := mw.CreateFormFile("file", "a.wav")
			_, _ = fw.Write(file)
		}
		_ = mw.Close()
		return &b, mw.FormDataContentType()
	}
	for name, tc := range map[string]struct {
		fields map[string]string
		file   []byte
		want   string
	}{
		"no file":    {map[string]string{"model": "whisper-1"}, nil, "file"},
		"no model":   {nil, fakeWAV, "model"},
		"empty file": {map[string]string{"model": "whisper-1"}, []byte{}, "too short"},
	} {
		body, ctype := form(tc.fields, tc.file)
		resp, err := http.Post(s.URL()+"/audio/transcriptions", ctype, body)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(msg), tc.want) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, msg)
		}
	}
	resp, err := http.Post(s.URL()+"/audio/transcriptions", "application/json", strings.NewReader(`{"model":"whisper-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("JSON body: status %d", resp.StatusCode)
	}
	if n := len(s.TranscriptionRequests()); n != 0 {
		t.Errorf("%d undecodable requests recorded", n)
	}
}

func TestTranscriptionDisconnects(t *testing.T) {
	for _, reply := range []TranscriptionReply{{Hang: true}, {Delay: time.Minute}} {
		s, c := start(t, nil)
		s.SetTranscription(func(TranscriptionRequest) TranscriptionReply { return reply })
		cancelInFlight(t, s, reply.Hang, func(ctx context.Context) error {
			_, err := c.CreateTranscription(ctx, transcriptionReq(""))
			return err
		})
	}
}

func TestCloseWithHangingTranscription(t *testing.T) {
	s, err := Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetTranscription(func(TranscriptionRequest) TranscriptionReply { return TranscriptionReply{Hang: true} })
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = s.URL()
	c := openai.NewClientWithConfig(cfg)
	go func() { _, _ = c.CreateTranscription(context.Background(), transcriptionReq("")) }()
	if !s.WaitActive(guard) {
		t.Fatal("the request never reached the server")
	}
	closeWhileHanging(t, s, "transcription")
}
