package fakellm

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// EmbeddingDim is the length of the embedding endpoint's vectors unless an
// EmbeddingReply says otherwise.
const EmbeddingDim = 64

// embeddingMaxInputs mirrors OpenAI's limit on texts per request.
const embeddingMaxInputs = 2048

// EmbeddingRequest is a decoded POST /v1/embeddings body.
type EmbeddingRequest struct {
	Model string
	// Input holds the texts in order; a request whose input is one string
	// has one.
	Input          []string
	EncodingFormat string
	// Raw is the raw request body, for assertions on fields not decoded here.
	Raw    []byte
	Header http.Header
}

// EmbeddingReply decides what the server answers to one embedding request.
// The zero value is the default: EmbeddingVector of each text, EmbeddingDim
// long, in order.
type EmbeddingReply struct {
	// Dim is the length of the vectors; 0 means EmbeddingDim.
	Dim int
	// Status, if != 0 and != 200, answers with this HTTP status and an
	// OpenAI-style error body (values net/http cannot send become 500).
	Status int
	// ErrorMessage is the message for the error body; defaults to the
	// status text. Ollama's for a model it does not have is
	// `model "nomic-embed-text" not found, try pulling it first` (404).
	ErrorMessage string
	// Delay is waited before answering (simulates the model's time); a
	// client leaving during it is reported on Disconnects.
	Delay time.Duration
	// Hang sends the response headers and then blocks until the client
	// goes away (or the server is closed).
	Hang bool
	// Missing leaves the last Missing vectors out of the answer: a server
	// that answers with fewer vectors than it was sent texts.
	Missing int
	// Reverse lists the vectors last first, each with its own index, as
	// a server that finishes them out of order may; the index field still
	// says which text each belongs to.
	Reverse bool
	// Indexes, if set, are the index fields of the answer's entries in
	// the order sent, instead of 0, 1, 2… (duplicates or gaps make an
	// answer no client can use).
	Indexes []int
	// Vectors, if non-nil, are sent instead of the computed vectors, e.g.
	// of differing or zero lengths.
	Vectors [][]float32
	// Body, if set, is the whole answer, sent with status 200 and
	// ContentType (default "text/plain; charset=utf-8") instead of an
	// embedding list: a server that is not OpenAI-compatible.
	Body        string
	ContentType string
	// Flood, if set (and Status is not), is the whole answer instead: a
	// hostile or broken server's answer of any size (see Flood).
	Flood *Flood
}

// SetEmbeddings makes respond decide the answer to each embedding request;
// nil restores the default. respond may be called concurrently.
func (s *Server) SetEmbeddings(respond func(EmbeddingRequest) EmbeddingReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embeddingRespond = respond
}

// EmbeddingRequests returns copies of all embedding requests received so
// far, in arrival order. Requests whose body could not be decoded are not
// recorded.
func (s *Server) EmbeddingRequests() []EmbeddingRequest { return recorded(s, &s.embeddingRequests) }

func (r EmbeddingReply) held() (bool, time.Duration, int, string) {
	return r.Hang, r.Delay, r.Status, r.ErrorMessage
}

func (r EmbeddingRequest) clone() EmbeddingRequest {
	c := r
	c.Input = append([]string(nil), r.Input...)
	c.Raw = append([]byte(nil), r.Raw...)
	c.Header = r.Header.Clone()
	return c
}

// EmbeddingVector is the endpoint's vector for text: a hashed bag of its
// lowercased words. Each word adds 1 to dimension fnv(word) mod dim, and a
// word of four or more letters adds 0.5 to the dimension of its first four,
// so that "painting" and "paint" are close. Texts that share words are
// therefore closer than texts that do not, which is what ranking tests
// need; the vector is not normalised, as some servers' are not. A text
// without letters or digits counts as one word, so no vector is all zeros.
func EmbeddingVector(text string, dim int) []float32 {
	v := make([]float32, dim)
	if dim <= 0 {
		return v
	}
	lower := strings.ToLower(text)
	words := strings.FieldsFunc(lower, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) == 0 {
		words = []string{lower}
	}
	for _, w := range words {
		v[bucket("w:"+w, dim)]++
		if utf8.RuneCountInString(w) >= 4 {
			v[bucket("p:"+string([]rune(w)[:4]), dim)] += 0.5
		}
	}
	return v
}

func bucket(s string, dim int) int {
	h := fnv.New32a()
	_, _ = io.WriteString(h, s) // a hash never fails to write
	return int(h.Sum32() % uint32(dim))
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	if !s.begin(w) {
		return
	}
	defer s.end()

	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, msg := decodeEmbeddingRequest(body)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	req.Header = r.Header.Clone()

	reply, c, ok := answerHeld(s, w, r, &s.embeddingRequests, &s.embeddingRespond, "embedding responder", req, "application/json")
	if !ok {
		return
	}
	if reply.Flood != nil {
		c.flood(reply.Flood)
		return
	}
	if reply.Body != "" {
		writeBody(w, reply.Body, reply.ContentType)
		return
	}
	list, err := embeddingAnswer(req, reply)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// decodeEmbeddingRequest reads a body, or says (as OpenAI would) why it
// cannot be served.
func decodeEmbeddingRequest(body []byte) (EmbeddingRequest, string) {
	var wr struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.Unmarshal(body, &wr); err != nil {
		return EmbeddingRequest{}, "We could not parse the JSON body of your request: " + err.Error()
	}
	req := EmbeddingRequest{Model: wr.Model, EncodingFormat: wr.EncodingFormat, Raw: body}
	var one string
	switch raw := strings.TrimSpace(string(wr.Input)); {
	case raw == "" || raw == "null":
		return req, "you must provide an input parameter"
	case json.Unmarshal(wr.Input, &one) == nil:
		req.Input = []string{one}
	case json.Unmarshal(wr.Input, &req.Input) != nil:
		return req, "fakellm: input must be a string or an array of strings (token inputs are not supported)"
	}
	switch {
	case req.Model == "":
		return req, "you must provide a model parameter"
	case len(req.Input) == 0:
		return req, "'$.input' is invalid: it must not be an empty array"
	case len(req.Input) > embeddingMaxInputs:
		return req, fmt.Sprintf("'$.input' is invalid: at most %d texts per request", embeddingMaxInputs)
	case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
		return req, fmt.Sprintf("encoding_format %q is invalid: use float or base64", req.EncodingFormat)
	}
	for i, text := range req.Input {
		if text == "" {
			return req, fmt.Sprintf("'$.input[%d]' is invalid: it must not be empty", i)
		}
	}
	return req, ""
}

func embeddingAnswer(req EmbeddingRequest, reply EmbeddingReply) (embeddingList, error) {
	vectors := reply.Vectors
	if vectors == nil {
		dim := reply.Dim
		if dim == 0 {
			dim = EmbeddingDim
		}
		for _, text := range req.Input {
			vectors = append(vectors, EmbeddingVector(text, dim))
		}
	}
	vectors = vectors[:max(0, len(vectors)-reply.Missing)]
	out := embeddingList{Object: "list", Data: []embeddingEntry{}, Model: req.Model}
	for i, v := range vectors {
		e := embeddingEntry{Object: "embedding", Index: i, Embedding: packFloats(v)}
		if req.EncodingFormat != "base64" {
			var err error
			if e.Embedding, err = json.Marshal(append([]float32{}, v...)); err != nil {
				return out, fmt.Errorf("fakellm: vector %d has no JSON form (NaN and infinities need encoding_format base64): %w", i, err)
			}
		}
		out.Data = append(out.Data, e)
	}
	if reply.Reverse {
		for i, j := 0, len(out.Data)-1; i < j; i, j = i+1, j-1 {
			out.Data[i], out.Data[j] = out.Data[j], out.Data[i]
		}
	}
	for i := range min(len(reply.Indexes), len(out.Data)) {
		out.Data[i].Index = reply.Indexes[i]
	}
	for _, text := range req.Input {
		out.Usage.PromptTokens += max(1, len(strings.Fields(text)))
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	return out, nil
}

// packFloats is v as OpenAI's base64 encoding: little-endian float32s.
func packFloats(v []float32) json.RawMessage {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	s, _ := json.Marshal(base64.StdEncoding.EncodeToString(b)) // a string always marshals
	return s
}

type embeddingList struct {
	Object string           `json:"object"`
	Data   []embeddingEntry `json:"data"`
	Model  string           `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

type embeddingEntry struct {
	Object    string          `json:"object"`
	Index     int             `json:"index"`
	Embedding json.RawMessage `json:"embedding"`
}
