package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
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
	enc *tokenEncoding
}

// tokenEncoding is one built tiktoken vocabulary, shared by every Tokenizer using it.
type tokenEncoding struct {
	name string
	tk   *tiktoken.Tiktoken // nil only if even the fallback failed to build

	// counts remembers recent counts: every request re-counts the whole
	// history (about a millisecond per thousand tokens), almost all of it
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

// countCacheMin is the shortest text worth remembering. Even short texts
// are: tiktoken-go sets up its regular expression's matcher on every call,
// so counting a 60-byte line costs about 20 µs and 130 allocations, and a
// role name about 1 µs, against about 50 ns to look one up. Requests repeat
// them all: role names, the date line (new once a minute), every short
// message of the history.
const countCacheMin = 2

// tokenEncodingEntry builds its encoding at most once, so a slow build of one
// encoding never blocks Tokenizers of another.
type tokenEncodingEntry struct {
	once sync.Once
	enc  *tokenEncoding
	err  error
}

var (
	bpeLoaderOnce sync.Once

	tokenEncodingsMu sync.Mutex
	tokenEncodings   = map[string]*tokenEncodingEntry{}
)

// NewTokenizer returns the tokenizer for model: tiktoken's model→encoding table
// (e.g. gpt-4o* → o200k_base, gpt-4/gpt-3.5 → cl100k_base); any unknown model
// name falls back to o200k_base. A provider prefix such as "openai/gpt-4" is
// ignored. The first Tokenizer of an encoding builds it (o200k_base: about
// 0.3 s and 22 MiB of live heap; cl100k_base about half that); later ones only
// look it up (under 100 ns).
func NewTokenizer(model string) *Tokenizer {
	name := encodingNameForModel(model)
	enc, err := sharedTokenEncoding(name)
	if err != nil && name != fallbackEncoding {
		enc, err = sharedTokenEncoding(fallbackEncoding)
	}
	if err != nil {
		// The vocabularies are embedded in the binary, so this is a broken
		// build rather than a runtime condition (logged once, when building
		// failed); still, a token budget must never take the server down:
		// count approximately instead.
		enc = &tokenEncoding{name: approxEncoding}
	}
	return &Tokenizer{enc: enc}
}

// approxEncoding names the byte-length estimate used if no vocabulary could
// be built.
const approxEncoding = "approx"

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
	if len(text) == 1 {
		return 1 // every encoding has a token for each single byte
	}
	if len(text) < countCacheMin {
		n, _ := t.countChunked(text, maxTokenChunk)
		return n
	}
	e := t.enc
	e.mu.Lock()
	n, ok := e.counts[text]
	e.mu.Unlock()
	if ok {
		return n
	}
	n, _ = t.countChunked(text, maxTokenChunk)
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

// maxTokenChunk bounds the bytes handed to tiktoken-go at once. Its byte-pair
// merge is quadratic in the length of a piece, so a single long piece (a run
// of letters with no space, base64, minified data in an uploaded file) would
// take seconds or minutes to count: 16 KB of "abab…" takes a quarter of a
// second, 1 MB would take hours. Natural text splits into chunks exactly, at
// piece boundaries (see isPieceBoundary); only text with no boundary in
// maxTokenChunk bytes is cut mid-piece, which can shift its count by a token or so.
const maxTokenChunk = 1024

// countChunked counts text limit bytes at a time. exact is false if some chunk
// had to be cut inside a piece.
func (t *Tokenizer) countChunked(text string, limit int) (n int, exact bool) {
	exact = true
	for text != "" {
		cut, ok := tokenSplitPoint(text, limit)
		// EncodeOrdinary treats special-token strings as text; Encode would
		// panic on them.
		n += len(t.enc.tk.EncodeOrdinary(text[:cut]))
		exact = exact && ok
		text = text[cut:]
	}
	return n, exact
}

// tokenSplitPoint returns where to cut text so that the head has at most limit
// bytes: at the last piece boundary (ok), or else at the last rune start.
func tokenSplitPoint(text string, limit int) (cut int, ok bool) {
	if len(text) <= limit {
		return len(text), true
	}
	prev, size := utf8.DecodeRuneInString(text)
	last := size // last rune start ≤ limit, if no boundary is found
	for i := size; i <= limit; i += size {
		var next rune
		next, size = utf8.DecodeRuneInString(text[i:])
		if isPieceBoundary(prev, next) {
			cut = i
		}
		last = i
		prev = next
	}
	if cut > 0 {
		return cut, true
	}
	return last, false
}

// isPieceBoundary reports whether, between runes prev and next, every
// tiktoken encoding's split pattern (o200k, cl100k, p50k, r50k) always ends a
// piece, independent of the text around them, so that encoding the two sides
// separately gives exactly the tokens of encoding them together:
//
//   - before a space that follows a non-space: a space inside a piece is
//     either its first character or part of an all-whitespace piece, and
//     the only lookahead, (?!\S), follows whitespace;
//   - after a letter or number, before a character that is neither letter,
//     number, mark, whitespace nor apostrophe (which could start 's, 're …):
//     letter and number pieces end there, punctuation pieces start there.
//
// regexp2 uses Go's unicode tables for \p{…} and unicode.IsSpace for \s, so
// the tests below are the patterns' own classes. The cases are chosen so that
// CJK text (letters then full-width punctuation) and code split as well as
// English. TestTokenizerChunkingIsExact checks this against whole-text counts.
func isPieceBoundary(prev, next rune) bool {
	if next == ' ' {
		return !unicode.IsSpace(prev)
	}
	return unicode.In(prev, unicode.L, unicode.N) &&
		next != '\'' && !unicode.IsSpace(next) && !unicode.In(next, unicode.L, unicode.N, unicode.M)
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
	if !buildableEncodings[enc] { // unknown model, or an encoding tiktoken-go cannot build (gpt2)
		return fallbackEncoding
	}
	return enc
}

// buildableEncodings lists the encodings tiktoken-go builds from tiktoken-go-loader's
// embedded vocabularies.
var buildableEncodings = map[string]bool{
	tiktoken.MODEL_O200K_BASE:  true,
	tiktoken.MODEL_CL100K_BASE: true,
	tiktoken.MODEL_P50K_BASE:   true,
	tiktoken.MODEL_P50K_EDIT:   true,
	tiktoken.MODEL_R50K_BASE:   true,
}

// sharedTokenEncoding returns the process-wide encoding called name, building it
// on first use.
func sharedTokenEncoding(name string) (*tokenEncoding, error) {
	tokenEncodingsMu.Lock()
	e, ok := tokenEncodings[name]
	if !ok {
		e = &tokenEncodingEntry{}
		tokenEncodings[name] = e
	}
	tokenEncodingsMu.Unlock()

	e.once.Do(func() {
		// No network at run time: the vocabularies come from the files
		// embedded by tiktoken-go-loader. The loader is a package variable of
		// tiktoken-go, so set it once, before any encoding is built.
		bpeLoaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader()) })
		tk, err := tiktoken.GetEncoding(name)
		if err != nil {
			e.err = fmt.Errorf("tiktoken encoding %s: %w", name, err)
			slog.Error("token counting degraded", "err", e.err)
			return
		}
		e.enc = &tokenEncoding{name: name, tk: tk, maxBytes: countCacheBytes}
	})
	return e.enc, e.err
}
