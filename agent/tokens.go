package agent

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"

	tiktoken "github.com/pkoukk/tiktoken-go"

	"koe/internal/bpe"
)

// Encoding names. Every model tiktoken does not know (llama3, qwen2.5:7b,
// mistral, …) is estimated with o200k_base: it is the newest OpenAI vocabulary
// and the closest to modern multilingual tokenizers.
const (
	EncodingO200k  = tiktoken.MODEL_O200K_BASE
	EncodingCL100k = tiktoken.MODEL_CL100K_BASE

	fallbackEncoding = EncodingO200k
)

// OpenAI's chat format costs (openai-cookbook, "How to count tokens with
// tiktoken"): every message is wrapped in <|start|>{role/name}\n{content}<|end|>\n,
// which is 3 tokens beyond the role and content, one more when a name is set,
// and every reply is primed with <|start|>assistant<|message|>.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
	tokensReplyPrime = 3
)

// Estimates for what the chat format does not document. They only need to
// be close: the budget keeps a safety margin and is calibrated against
// provider-reported usage.
const (
	// tokensPerToolCall covers the wrapping of one tool call in an assistant
	// message (its type, the JSON punctuation around id/name/arguments).
	tokensPerToolCall = 3

	// Tool definitions are rendered by OpenAI into the system message as a
	// TypeScript namespace:
	//
	//	# Tools
	//	## functions
	//	namespace functions {
	//	// {description}
	//	type {name} = (_: {parameters}) => any;
	//	} // namespace functions
	//
	// tokensPerTool covers the per-function line ("// ", "type ", " = (_: ",
	// ") => any;", newlines); tokensToolsHeader the namespace wrapper, paid
	// once when any tool is present. The schema itself is counted as its
	// compact JSON, which is somewhat longer than the TypeScript rendering
	// (quotes, "type"/"properties" keys), so the total errs on the high side.
	tokensPerTool     = 8
	tokensToolsHeader = 12

	// Images are billed by tiles, not bytes, and koe does not decode them to
	// learn their size. "low" detail is a flat 85 tokens; "high"/"auto" is
	// counted as a 1024×1024 image at high detail: 85 base + 4 tiles × 170.
	tokensImageLow  = 85
	tokensImageHigh = 85 + 4*170 // 765
)

// Tokenizer counts tokens the way the model's tokenizer would (estimates for
// non-OpenAI models; calibrated later against provider-reported usage).
// It is safe for concurrent use and cheap to create: the encodings behind it
// are built once per process, on first use, and shared.
type Tokenizer struct {
	enc *tokenEncoding
}

// tokenEncoding is one vocabulary, shared by every Tokenizer using it.
// Counting is package bpe's: tiktoken's split and byte-pair merge over a
// rank table without pointers (tiktoken-go's maps of the same vocabulary
// cost five times the memory, all of it scanned by every garbage
// collection). tiktoken-go only names the encodings and models here, and
// is the reference the tests compare every count with.
type tokenEncoding struct {
	name string

	// once builds bpe on the first count: a process that never counts
	// with an encoding never holds it.
	once sync.Once
	bpe  *bpe.Encoding // nil if it could not be built: counts are then approximate

	// counts remembers recent counts: every request re-counts the whole
	// history (about 0.1 ms per thousand tokens), almost all of it
	// unchanged since the previous request. Bounded: cleared when full.
	mu     sync.Mutex
	counts map[string]int
	bytes  int // the length of the texts in counts
	// maxBytes bounds bytes (countCacheBytes; smaller in tests).
	maxBytes int
}

// countCacheSize and countCacheBytes bound the remembered counts per
// encoding: entries, and the bytes of text they keep (a few long pasted
// texts must not pin hundreds of megabytes after their sessions left).
const (
	countCacheSize  = 8192
	countCacheBytes = 8 << 20
)

// countCacheMin is the shortest text worth remembering. Counting a 60-byte
// line costs about 2 µs and a role name a few hundred ns, against about 50 ns
// to look one up; requests repeat them all: role names, the date line (new once
// a minute), every message of the history.
const countCacheMin = 2

var (
	tokenEncodingsMu sync.Mutex
	tokenEncodings   = map[string]*tokenEncoding{}
)

// NewTokenizer returns the tokenizer for model: tiktoken's model→encoding table
// (e.g. gpt-4o* → o200k_base, gpt-4/gpt-3.5 → cl100k_base); any unknown model
// name falls back to o200k_base. A provider prefix such as "openai/gpt-4" is
// ignored. NewTokenizer only looks the encoding up (under 100 ns); the first
// count of an encoding in the process builds it (o200k_base: about 50 ms and
// 8 MiB of RSS; cl100k_base half that).
func NewTokenizer(model string) *Tokenizer {
	return &Tokenizer{enc: sharedTokenEncoding(encodingNameForModel(model))}
}

// Encoding returns the name of the encoding in use, e.g. "o200k_base".
func (t *Tokenizer) Encoding() string { return t.enc.name }

// Count returns the number of tokens of text. Special-token strings such as
// "<|endoftext|>" are counted as the ordinary text they are: user text must
// never be able to smuggle a control token in, nor make counting panic.
func (t *Tokenizer) Count(text string) int {
	if text == "" {
		return 0
	}
	enc := t.enc.encoding()
	if enc == nil {
		return (len(text) + 3) / 4
	}
	if len(text) == 1 {
		return 1 // every encoding has a token for each single byte
	}
	if len(text) < countCacheMin {
		return enc.Count(text)
	}
	e := t.enc
	e.mu.Lock()
	n, ok := e.counts[text]
	e.mu.Unlock()
	if ok {
		return n
	}
	n = enc.Count(text)
	if len(text) > t.enc.maxBytes/8 {
		return n // rare, and counting it again costs little beside its size
	}
	// The key is a copy: text may be a slice of something much larger.
	key := strings.Clone(text)
	e.mu.Lock()
	if e.counts == nil || len(e.counts) >= countCacheSize || e.bytes+len(key) > e.maxBytes {
		e.counts = make(map[string]int, 256)
		e.bytes = 0
	}
	if _, ok := e.counts[key]; !ok {
		e.counts[key] = n
		e.bytes += len(key)
	}
	e.mu.Unlock()
	return n
}

// CountMessage returns the tokens one chat message costs in a request: its
// content (text, or its parts with a fixed estimate per image), role, name,
// tool calls and tool_call_id, plus the chat format's per-message overhead.
func (t *Tokenizer) CountMessage(m WireMessage) int {
	n := tokensPerMessage + t.Count(m.Role)
	if len(m.Parts) == 0 {
		n += t.Count(m.Content)
	}
	for _, p := range m.Parts {
		n += t.countPart(p)
	}
	if m.Name != "" {
		n += tokensPerName + t.Count(m.Name)
	}
	for _, tc := range m.ToolCalls {
		// Each call goes out typed "function".
		n += tokensPerToolCall + t.Count(tc.ID) + t.Count("function") +
			t.Count(tc.Name) + t.Count(tc.Arguments)
	}
	n += t.Count(m.ToolCallID)
	return n
}

func (t *Tokenizer) countPart(p ContentPart) int {
	switch {
	case p.ImageURL == "":
		return t.Count(p.Text)
	case p.Detail == ImageDetailLow:
		return tokensImageLow
	default:
		return tokensImageHigh
	}
}

// CountMessages returns what msgs cost in a request: the sum of CountMessage
// plus the 3 tokens that prime the reply.
func (t *Tokenizer) CountMessages(msgs []WireMessage) int {
	n := tokensReplyPrime
	for _, m := range msgs {
		n += t.CountMessage(m)
	}
	return n
}

// CountTools estimates what tool definitions cost: for each tool its name,
// description and the compact JSON of its parameters schema, plus
// tokensPerTool; plus tokensToolsHeader once if there is any tool. See the
// constants for how the estimate was chosen.
func (t *Tokenizer) CountTools(tools []ToolSpec) int {
	if len(tools) == 0 {
		return 0
	}
	n := tokensToolsHeader
	for _, tool := range tools {
		n += t.CountTool(tool)
	}
	return n
}

// CountTool estimates what one tool definition costs, without the header
// CountTools adds once for all.
func (t *Tokenizer) CountTool(tool ToolSpec) int {
	return tokensPerTool + t.Count(tool.Name) + t.Count(tool.Description) + t.Count(compactJSON(tool.Parameters))
}

// compactJSON is schema without insignificant white space (as it is
// counted whichever way it was written), or as given if it is not JSON.
func compactJSON(schema json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, schema); err != nil {
		return string(schema)
	}
	return b.String()
}

// encodingNameForModel maps a model to its encoding with tiktoken's tables:
// an exact name first, then the longest matching prefix (the library ranges
// over its prefix map, whose order Go randomises). Names are compared in
// lower case, without a provider prefix ("openai/gpt-4o" → "gpt-4o").
func encodingNameForModel(model string) string {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	enc, ok := tiktoken.MODEL_TO_ENCODING[name]
	if !ok {
		bestLen := 0
		for prefix, e := range tiktoken.MODEL_PREFIX_TO_ENCODING {
			if len(prefix) > bestLen && strings.HasPrefix(name, prefix) {
				enc, bestLen = e, len(prefix)
			}
		}
	}
	if !bpe.Known(enc) { // unknown model, or an encoding with no embedded vocabulary (gpt2)
		return fallbackEncoding
	}
	return enc
}

// sharedTokenEncoding returns the process-wide encoding called name (not
// built yet if nothing counted with it).
func sharedTokenEncoding(name string) *tokenEncoding {
	tokenEncodingsMu.Lock()
	defer tokenEncodingsMu.Unlock()
	e, ok := tokenEncodings[name]
	if !ok {
		e = &tokenEncoding{name: name, maxBytes: countCacheBytes}
		tokenEncodings[name] = e
	}
	return e
}

// encoding returns e's vocabulary, building it on first use, or nil if it
// could not be built. Building one encoding never waits for another's.
func (e *tokenEncoding) encoding() *bpe.Encoding {
	e.once.Do(func() {
		// No network at run time: the vocabularies are embedded in the
		// binary (tiktoken-go-loader's files), so failing here is a broken
		// build rather than a runtime condition; still, a token budget
		// must never take the server down: count approximately instead.
		enc, err := bpe.Load(e.name)
		if err != nil {
			slog.Error("token counting degraded to an estimate by length", "encoding", e.name, "err", err)
			return
		}
		e.bpe = enc
	})
	return e.bpe
}
