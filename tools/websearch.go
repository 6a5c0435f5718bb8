package tools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

const webSearchName = "web_search"

// The web search providers of tools.web_search.provider.
const (
	ProviderSearXNG = "searxng"
	ProviderTavily  = "tavily"
)

// Defaults of tools.web_search.
const (
	DefaultTavilyBaseURL   = "https://api.tavily.com"
	DefaultTavilyAPIKeyEnv = "TAVILY_API_KEY"
	defaultWebSearchLimit  = 5
)

// WebSearchSettings are tools.web_search: which search API answers.
type WebSearchSettings struct {
	// Provider is "searxng" (a SearXNG instance with the JSON format on)
	// or "tavily".
	Provider string `yaml:"provider"`
	// BaseURL is where the provider answers: required for SearXNG,
	// DefaultTavilyBaseURL for Tavily.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding Tavily's key
	// (empty: DefaultTavilyAPIKeyEnv). The key itself stays out of files.
	APIKeyEnv string `yaml:"api_key_env"`
}

var envName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
})

type webSearchArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

var webSearchSchema = newSchema(map[string]property{
	"query": {
		Type:        "string",
		Description: `The search query, as you would type it into a search engine, e.g. "weather warnings Hamburg today".`,
	},
	"limit": integer(1, 10, fmt.Sprintf("How many results to return, best first (default %d).", defaultWebSearchLimit)),
}, "query")

// searcher is one provider's way of asking.
type searcher func(ctx context.Context, query string, limit int) ([]document, error)

func newWebSearch(opts Options) (tool, error) {
	s := opts.WebSearch
	var search searcher
	switch s.Provider {
	case ProviderSearXNG:
		if s.BaseURL == "" {
			return tool{}, errors.New("tools.web_search.base_url is required with provider searxng: the address of a SearXNG instance")
		}
		if err := checkBaseURL("tools.web_search.base_url", s.BaseURL); err != nil {
			return tool{}, err
		}
		search = searxng(newWebClient(opts, "the SearXNG server"), s.BaseURL)
	case ProviderTavily:
		base := cmp.Or(s.BaseURL, DefaultTavilyBaseURL)
		if err := checkBaseURL("tools.web_search.base_url", base); err != nil {
			return tool{}, err
		}
		keyEnv := cmp.Or(s.APIKeyEnv, DefaultTavilyAPIKeyEnv)
		if !envName().MatchString(keyEnv) {
			return tool{}, fmt.Errorf("tools.web_search.api_key_env %q is not an environment variable name", keyEnv)
		}
		key := strings.TrimSpace(opts.Getenv(keyEnv))
		if key == "" {
			return tool{}, fmt.Errorf("tools.web_search.api_key_env: the environment variable %s is empty or not set; web_search with provider tavily needs its API key there", keyEnv)
		}
		search = tavily(newWebClient(opts, "Tavily"), base, key)
	case "":
		return tool{}, errors.New("tools.web_search.provider is required: searxng or tavily")
	default:
		return tool{}, fmt.Errorf("tools.web_search.provider %q is unknown: searxng or tavily", s.Provider)
	}
	maxChars, limit := opts.MaxDocumentChars, opts.MaxResultChars
	return tool{
		spec: agentSpec(webSearchName,
			"Searches the web and returns the best results as numbered documents with title, URL and an excerpt. "+
				"Use it for news, current events, prices, opening hours and anything that may have changed recently; "+
				"cite what you use by its number, like [1].",
			webSearchSchema),
		run: func(ctx context.Context, args string) (string, error) {
			var a webSearchArgs
			if err := webSearchSchema.decode(args, &a); err != nil {
				return "", err
			}
			query := oneLine(a.Query)
			if query == "" {
				return "", errors.New("the query is empty")
			}
			n := cmp.Or(a.Limit, defaultWebSearchLimit)
			docs, err := search(ctx, query, n)
			if err != nil {
				return "", err
			}
			if len(docs) == 0 {
				return noResults(query), nil
			}
			return documentsJSON(docs[:min(len(docs), n)], maxChars, limit), nil
		},
	}, nil
}

// searchHit is a result as both providers write it.
type searchHit struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Content string `json:"content"`
}

func hitsToDocuments(hits []searchHit) []document {
	docs := make([]document, 0, len(hits))
	for _, h := range hits {
		if h.URL == "" && h.Title == "" && h.Content == "" {
			continue
		}
		docs = append(docs, document{Title: h.Title, Metadata: documentMetadata{URL: h.URL}, Contents: oneLine(h.Content)})
	}
	return docs
}

// searxng asks a SearXNG instance's JSON API, which has no result count:
// the caller keeps the first ones.
func searxng(web webClient, base string) searcher {
	return func(ctx context.Context, query string, _ int) ([]document, error) {
		var res struct {
			Results []searchHit `json:"results"`
		}
		err := web.getJSON(ctx, endpoint(base, "/search", url.Values{"q": {query}, "format": {"json"}}), &res)
		if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusForbidden {
			// What SearXNG answers when its settings leave JSON out.
			return nil, fmt.Errorf("%w (is json in the instance's search.formats setting?)", err)
		}
		if err != nil {
			return nil, err
		}
		return hitsToDocuments(res.Results), nil
	}
}

// tavily asks Tavily's search API, key in the Authorization header.
func tavily(web webClient, base, key string) searcher {
	header := http.Header{"Authorization": {"Bearer " + key}}
	return func(ctx context.Context, query string, limit int) ([]document, error) {
		body := struct {
			Query      string `json:"query"`
			MaxResults int    `json:"max_results"`
		}{query, limit}
		var res struct {
			Results []searchHit `json:"results"`
		}
		if err := web.postJSON(ctx, endpoint(base, "/search", nil), header, body, &res); err != nil {
			return nil, err
		}
		return hitsToDocuments(res.Results), nil
	}
}
