package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
	openai "github.com/sashabaranov/go-openai"
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
// are built once per process and shared.
type Tokenizer struct {
	model string
	enc   *encoding
}

// encoding is one built tiktoken vocabulary, shared by every Tokenizer using it.
type encoding struct {
	name string
	tk   *tiktoken.Tiktoken // nil only if even the fallback failed to build
}

// encodingEntry builds its encoding at most once, so a slow build of one
// encoding never blocks Tokenizers of another.
type encodingEntry struct {
	once sync.Once
	enc  *encoding
	err  error
}

var (
	loaderOnce sync.Once

	encodingsMu sync.Mutex
	encodings   = map[string]*encodingEntry{}
)

// NewTokenizer returns the tokenizer for model: tiktoken's model→encoding table
// (e.g. gpt-4o* → o200k_base, gpt-4/gpt-3.5 → cl100k_base); any unknown model
// name falls back to o200k_base. A provider prefix such as "openai/gpt-4" is
// ignored. The first Tokenizer of an encoding builds it (tens of
// milliseconds, tens of megabytes); later ones only look it up.
func NewTokenizer(model string) *Tokenizer {
	name := encodingNameForModel(model)
	enc, err := sharedEncoding(name)
	if err != nil && name != fallbackEncoding {
		enc, err = sharedEncoding(fallbackEncoding)
	}
	if err != nil {
		// The vocabularies are embedded in the binary, so this is a broken
		// build rather than a runtime condition; still, a token budget must
		// never take the server down: count approximately instead.
		enc = &encoding{name: approxEncoding}
	}
	return &Tokenizer{model: model, enc: enc}
}

// approxEncoding names the byte-length estimate used if no vocabulary could
// be built.
const approxEncoding = "approx"

// Model returns the model name the tokenizer was created for.
func (t *Tokenizer) Model() string { return t.model }

// Encoding returns the name of the encoding in use, e.g. "o200k_base".
func (t *Tokenizer) Encoding() string { return t.enc.name }

// Count returns the number of tokens of text. Special-token strings such as
// "<|endoftext|>" are counted as the ordinary text they are: user text must
// never be able to smuggle a control token in, nor make counting panic.
func (t *Tokenizer) Count(text string) int {
	if text == "" {
		return 0
	}
	if t.enc.tk == nil {
		return (len(text) + 3) / 4
	}
	// EncodeOrdinary ignores special tokens; Encode would panic on them.
	return len(t.enc.tk.EncodeOrdinary(text))
}

// CountMessage returns the tokens one chat message costs in a request: its
// content (text parts, plus a fixed estimate per image), role, name, tool
// calls and tool_call_id, plus the chat format's per-message overhead.
func (t *Tokenizer) CountMessage(m openai.ChatCompletionMessage) int {
	n := tokensPerMessage + t.Count(m.Role) + t.Count(m.Content)
	if m.Name != "" {
		n += tokensPerName + t.Count(m.Name)
	}
	for _, p := range m.MultiContent {
		n += t.countPart(p)
	}
	n += t.Count(m.Refusal) + t.Count(m.ReasoningContent)
	if m.FunctionCall != nil {
		n += tokensPerToolCall + t.Count(m.FunctionCall.Name) + t.Count(m.FunctionCall.Arguments)
	}
	for _, tc := range m.ToolCalls {
		n += tokensPerToolCall + t.Count(tc.ID) + t.Count(string(tc.Type)) +
			t.Count(tc.Function.Name) + t.Count(tc.Function.Arguments)
	}
	n += t.Count(m.ToolCallID)
	return n
}

func (t *Tokenizer) countPart(p openai.ChatMessagePart) int {
	switch {
	case p.Type == openai.ChatMessagePartTypeImageURL || p.ImageURL != nil:
		if p.ImageURL != nil && p.ImageURL.Detail == openai.ImageURLDetailLow {
			return tokensImageLow
		}
		return tokensImageHigh
	default:
		return t.Count(p.Text)
	}
}

// CountMessages returns what msgs cost in a request: the sum of CountMessage
// plus the 3 tokens that prime the reply.
func (t *Tokenizer) CountMessages(msgs []openai.ChatCompletionMessage) int {
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
func (t *Tokenizer) CountTools(tools []openai.Tool) int {
	if len(tools) == 0 {
		return 0
	}
	n := tokensToolsHeader
	for _, tool := range tools {
		n += tokensPerTool
		if f := tool.Function; f != nil {
			n += t.Count(f.Name) + t.Count(f.Description) + t.Count(schemaText(f.Parameters))
		}
		if len(tool.Parameters) > 0 { // Responses-API inline properties
			n += t.Count(schemaText(tool.Parameters))
		}
	}
	return n
}

// schemaText is the compact JSON of a parameters schema, whatever form the
// caller gave it in (a struct, a map, json.RawMessage, raw bytes or a string).
func schemaText(v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	case []byte:
		return string(s)
	case json.RawMessage:
		return string(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
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
	if enc, ok := tiktoken.MODEL_TO_ENCODING[name]; ok {
		return enc
	}
	best, bestLen := fallbackEncoding, 0
	for prefix, enc := range tiktoken.MODEL_PREFIX_TO_ENCODING {
		if len(prefix) > bestLen && strings.HasPrefix(name, prefix) {
			best, bestLen = enc, len(prefix)
		}
	}
	return best
}

// sharedEncoding returns the process-wide encoding called name, building it
// on first use.
func sharedEncoding(name string) (*encoding, error) {
	encodingsMu.Lock()
	e, ok := encodings[name]
	if !ok {
		e = &encodingEntry{}
		encodings[name] = e
	}
	encodingsMu.Unlock()

	e.once.Do(func() {
		// No network at run time: the vocabularies come from the files
		// embedded by tiktoken-go-loader. The loader is a package variable of
		// tiktoken-go, so set it once, before any encoding is built.
		loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
		tk, err := tiktoken.GetEncoding(name)
		if err != nil {
			e.err = fmt.Errorf("tiktoken encoding %s: %w", name, err)
			return
		}
		e.enc = &encoding{name: name, tk: tk}
	})
	return e.enc, e.err
}

// sharedEncodingOf exposes the encoding a Tokenizer uses, so tests can check
// that Tokenizers share one instead of building their own.
func (t *Tokenizer) sharedEncodingOf() *encoding { return t.enc }
