package llm

import (
	"fmt"
	"strings"

	"koe/agent"
	"koe/internal/modelhttp"
)

// EmbedError is a failed embedding request, with a message a person can
// act on. It holds what a chat failure holds, worded for the embeddings
// settings: Kind sorts it as for the chat client (agent.KindTimeout,
// agent.KindNotFound…), and agent.KindEmptyReply means the server
// answered, but not with one usable vector per text. Err is the cause.
type EmbedError struct{ agent.LLMError }

func (e *EmbedError) Error() string {
	detail := ""
	if e.Detail != "" {
		detail = ": " + e.Detail
	}
	switch e.Kind {
	case agent.KindUnreachable:
		return fmt.Sprintf("cannot reach the embeddings server at %s%s. Start it, or set embeddings.base_url in conf.yaml (empty: koe ranks by keywords only)", e.BaseURL, detail)
	case agent.KindUnauthorized:
		return fmt.Sprintf("the embeddings server at %s rejected the API key (HTTP %d)%s. Set %s or embeddings.api_key", e.BaseURL, e.Status, detail, EnvEmbeddingsAPIKey)
	case agent.KindNotFound:
		if modelMissing(e.Detail) {
			return fmt.Sprintf("the embeddings server at %s does not have model %q (HTTP %d)%s. Fetch it (for Ollama: ollama pull %s), or set embeddings.model to a model the server serves", e.BaseURL, e.Model, e.Status, detail, e.Model)
		}
		return fmt.Sprintf("the embeddings server at %s has no embeddings endpoint or does not know model %q (HTTP %d)%s. Check that embeddings.base_url ends in /v1 and that embeddings.model names a model it serves", e.BaseURL, e.Model, e.Status, detail)
	case agent.KindRateLimited:
		return fmt.Sprintf("the embeddings server at %s is rate limiting koe (HTTP 429)%s. Wait a moment, raise your quota, or lower embeddings.batch", e.BaseURL, detail)
	case agent.KindServer:
		return fmt.Sprintf("the embeddings server at %s failed (HTTP %d)%s. Check its logs", e.BaseURL, e.Status, detail)
	case agent.KindBadRequest:
		return fmt.Sprintf("the embeddings server at %s refused to embed with model %q (HTTP %d)%s. Check that embeddings.model is an embedding model such as nomic-embed-text", e.BaseURL, e.Model, e.Status, detail)
	case agent.KindTimeout:
		return fmt.Sprintf("the embeddings server at %s did not answer in time%s. It may be busy or still loading model %q", e.BaseURL, detail, e.Model)
	case agent.KindTooLarge:
		return fmt.Sprintf("the embeddings server at %s sent more than koe reads%s. %s", e.BaseURL, detail, modelhttp.TooLargeAdvice)
	case agent.KindEmptyReply:
		return fmt.Sprintf("the embeddings server at %s gave no usable embeddings for model %q%s. Is embeddings.base_url an OpenAI-compatible /v1 endpoint?", e.BaseURL, e.Model, detail)
	}
	return fmt.Sprintf("embeddings error at %s%s", e.BaseURL, detail)
}

// modelMissing reports whether a 404's message says the model is missing
// (Ollama: `model "x" not found, try pulling it first`; OpenAI and vLLM:
// "The model `x` does not exist") rather than the endpoint.
func modelMissing(detail string) bool {
	d := strings.ToLower(detail)
	return strings.Contains(d, "model") && (strings.Contains(d, "not found") || strings.Contains(d, "does not exist"))
}
