package fakellm

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"time"
)

// DefaultTranscription is the text the transcription endpoint answers with
// unless SetTranscription says otherwise.
const DefaultTranscription = "hello from the fake transcriber"

// transcriptionMaxField bounds a multipart field other than the file.
const transcriptionMaxField = 64 << 10

// TranscriptionRequest is a decoded POST /v1/audio/transcriptions form.
type TranscriptionRequest struct {
	Model          string
	Language       string
	Prompt         string
	ResponseFormat string
	// Filename is the name the client gave the file part; servers use its
	// extension to pick a decoder.
	Filename   string
	AudioBytes int
	// Audio is the uploaded file itself.
	Audio  []byte
	Header http.Header
}

// TranscriptionReply decides what the server answers to one transcription
// request. The zero value is the default: DefaultTranscription.
type TranscriptionReply struct {
	// Text is the transcript; "" means DefaultTranscription (set Empty for
	// a transcript with no words).
	Text string
	// Empty answers with an empty transcript, as a server does for silence.
	Empty bool
	// Status, if != 0 and != 200, answers with this HTTP status and an
	// OpenAI-style error body (values net/http cannot send become 500).
	Status int
	// ErrorMessage is the message for the error body; defaults to the
	// status text.
	ErrorMessage string
	// Delay is waited before answering (simulates recognition time); a
	// client leaving during it is reported on Disconnects.
	Delay time.Duration
	// Hang sends the response headers and then blocks until the client
	// goes away (or the server is closed).
	Hang bool
	// Flood, if set (and Status is not), is the whole answer instead: a
	// hostile or broken server's answer of any size (see Flood).
	Flood *Flood
}

// SetTranscription makes respond decide the answer to each transcription
// request; nil restores the default. respond may be called concurrently.
func (s *Server) SetTranscription(respond func(TranscriptionRequest) TranscriptionReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transcriptionRespond = respond
}

// TranscriptionRequests returns copies of all transcription requests
// received so far, in arrival order. Requests whose form could not be
// decoded are not recorded.
func (s *Server) TranscriptionRequests() []TranscriptionRequest {
	return recorded(s, &s.transcriptionRequests)
}

func (r TranscriptionReply) held() (bool, time.Duration, int, string) {
	return r.Hang, r.Delay, r.Status, r.ErrorMessage
}

func (r TranscriptionRequest) clone() TranscriptionRequest {
	c := r
	c.Audio = append([]byte(nil), r.Audio...)
	c.Header = r.Header.Clone()
	return c
}

func (s *Server) transcription(w http.ResponseWriter, r *http.Request) {
	if !s.begin(w) {
		return
	}
	defer s.end()

	req, status, msg := decodeTranscription(w, r)
	if msg != "" {
		writeError(w, status, msg)
		return
	}
	req.Header = r.Header.Clone()

	reply, c, ok := answerHeld(s, w, r, &s.transcriptionRequests, &s.transcriptionRespond, "transcription responder", req, "application/json")
	if !ok {
		return
	}
	if reply.Flood != nil {
		c.flood(reply.Flood)
		return
	}

	text := reply.Text
	switch {
	case reply.Empty:
		text = ""
	case text == "":
		text = DefaultTranscription
	}
	switch req.ResponseFormat {
	case "", "json":
		writeJSON(w, http.StatusOK, transcriptionJSON{Text: text})
	case "verbose_json":
		writeJSON(w, http.StatusOK, transcriptionJSON{Task: "transcribe", Language: req.Language, Text: text})
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(text)+1))
		w.WriteHeader(http.StatusOK)
		c.write([]byte(text + "\n"))
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("fakellm: response_format %q is not supported: use json, verbose_json or text", req.ResponseFormat))
	}
}

type transcriptionJSON struct {
	Task     string `json:"task,omitempty"`
	Language string `json:"language,omitempty"`
	Text     string `json:"text"`
}

// decodeTranscription reads the multipart form the way OpenAI does, or
// returns the status and message of the error to answer with. It streams
// the parts rather than using ParseMultipartForm, which would spill large
// files to disk.
func decodeTranscription(w http.ResponseWriter, r *http.Request) (req TranscriptionRequest, status int, msg string) {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" {
		return req, http.StatusBadRequest, fmt.Sprintf("Invalid Content-Type header (%q): the request must be multipart/form-data", r.Header.Get("Content-Type"))
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return req, http.StatusBadRequest, "could not read the multipart form: " + err.Error()
	}
	haveFile := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return req, formErrorStatus(err), "could not read the multipart form: " + err.Error()
		}
		name := part.FormName()
		if name == "file" {
			req.Filename = part.FileName()
			req.Audio, err = io.ReadAll(part)
			haveFile = true
		} else {
			var value string
			value, err = readField(part)
			switch name {
			case "model":
				req.Model = value
			case "language":
				req.Language = value
			case "prompt":
				req.Prompt = value
			case "response_format":
				req.ResponseFormat = value
			}
		}
		part.Close()
		if err != nil {
			return req, formErrorStatus(err), fmt.Sprintf("could not read form field %q: %v", name, err)
		}
	}
	req.AudioBytes = len(req.Audio)
	switch {
	case !haveFile:
		return req, http.StatusBadRequest, "you must provide a file parameter"
	case req.Model == "":
		return req, http.StatusBadRequest, "you must provide a model parameter"
	case req.AudioBytes == 0:
		return req, http.StatusBadRequest, "Audio file is too short. Minimum audio length is 0.1 seconds."
	}
	return req, 0, ""
}

func readField(part *multipart.Part) (string, error) {
	b, err := io.ReadAll(io.LimitReader(part, transcriptionMaxField+1))
	if err != nil {
		return "", err
	}
	if len(b) > transcriptionMaxField {
		return "", fmt.Errorf("longer than %d bytes", transcriptionMaxField)
	}
	return string(b), nil
}

func formErrorStatus(err error) int {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}
