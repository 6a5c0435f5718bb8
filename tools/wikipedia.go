package tools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

const wikipediaName = "search_wikipedia"

// Defaults of tools.wikipedia. {lang} in the base URL stands for the
// language.
const (
	DefaultWikipediaBaseURL  = "https://{lang}.wikipedia.org"
	DefaultWikipediaLanguage = "en"
	defaultWikipediaLimit    = 3
)

// WikipediaSettings are tools.wikipedia: which MediaWiki answers, in which
// language.
type WikipediaSettings struct {
	// BaseURL serves /w/api.php (empty: DefaultWikipediaBaseURL); {lang}
	// in it is replaced by Language.
	BaseURL string `yaml:"base_url"`
	// Language is a Wikipedia language code such as "en", "de" or
	// "zh-yue" (empty: DefaultWikipediaLanguage).
	Language string `yaml:"language"`
}

var wikipediaLanguage = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z][a-z-]{1,11}$`)
})

type wikipediaArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

var wikipediaSchema = newSchema(map[string]property{
	"query": {
		Type:        "string",
		Description: `What to look up, as words a Wikipedia article would contain, e.g. "Marie Curie" or "boiling point of water".`,
	},
	"limit": integer(1, 10, fmt.Sprintf("How many articles to return, best match first (default %d).", defaultWikipediaLimit)),
}, "query")

type wikipedia struct {
	web      webClient
	base     string
	maxChars int
	limit    int
}

func newWikipedia(opts Options) (tool, error) {
	s := opts.Wikipedia
	if s.Language == "" {
		s.Language = DefaultWikipediaLanguage
	}
	if !wikipediaLanguage().MatchString(s.Language) {
		return tool{}, fmt.Errorf("tools.wikipedia.language %q is not a Wikipedia language code such as en, de or zh-yue", s.Language)
	}
	if s.BaseURL == "" {
		s.BaseURL = DefaultWikipediaBaseURL
	}
	base := strings.ReplaceAll(s.BaseURL, "{lang}", s.Language)
	if err := checkBaseURL("tools.wikipedia.base_url", base); err != nil {
		return tool{}, err
	}
	w := &wikipedia{web: newWebClient(opts, "Wikipedia"), base: base, maxChars: opts.MaxDocumentChars, limit: opts.MaxResultChars}
	return tool{
		spec: agentSpec(wikipediaName,
			"Searches Wikipedia and returns the introductions of the best matching articles as numbered documents "+
				"with their URLs. Use it for facts about people, places, history, science and other encyclopedic topics; "+
				"cite what you use by its number, like [1].",
			wikipediaSchema),
		run: func(ctx context.Context, args string) (string, error) {
			var a wikipediaArgs
			if err := wikipediaSchema.decode(args, &a); err != nil {
				return "", err
			}
			return w.search(ctx, a)
		},
	}, nil
}

// wikiPage is one page of a MediaWiki query answer (formatversion=2).
type wikiPage struct {
	PageID  int    `json:"pageid"`
	Title   string `json:"title"`
	Index   int    `json:"index"`
	FullURL string `json:"fullurl"`
	Extract string `json:"extract"`
	Missing bool   `json:"missing"`
}

// search finds articles and their introductions in one request: the
// search is the generator of the pages whose extracts are asked for,
// which saves a round trip over searching then fetching.
func (w *wikipedia) search(ctx context.Context, a wikipediaArgs) (string, error) {
	query := oneLine(a.Query)
	if query == "" {
		return "", errors.New("the query is empty")
	}
	limit := cmp.Or(a.Limit, defaultWikipediaLimit)
	q := url.Values{
		"action":        {"query"},
		"format":        {"json"},
		"formatversion": {"2"},
		"utf8":          {"1"},
		"generator":     {"search"},
		"gsrsearch":     {query},
		"gsrlimit":      {strconv.Itoa(limit)},
		"prop":          {"extracts|info"},
		"exintro":       {"1"},
		"explaintext":   {"1"},
		"exlimit":       {"max"},
		"inprop":        {"url"},
		"redirects":     {"1"},
	}
	var res struct {
		Error *struct {
			Code string `json:"code"`
			Info string `json:"info"`
		} `json:"error"`
		Query *struct {
			Pages []wikiPage `json:"pages"`
		} `json:"query"`
	}
	if err := w.web.getJSON(ctx, endpoint(w.base, "/w/api.php", q), &res); err != nil {
		return "", err
	}
	// MediaWiki reports a bad request with status 200.
	if res.Error != nil {
		return "", fmt.Errorf("the Wikipedia API refused the search: %s", clipTo(cmp.Or(res.Error.Info, res.Error.Code), 160))
	}
	if res.Query == nil || len(res.Query.Pages) == 0 {
		return noResults(query), nil
	}
	pages := slices.DeleteFunc(res.Query.Pages, func(p wikiPage) bool { return p.Missing })
	slices.SortStableFunc(pages, func(x, y wikiPage) int { return cmp.Compare(x.Index, y.Index) })
	docs := make([]document, 0, len(pages))
	for _, p := range pages[:min(len(pages), limit)] {
		contents := strings.TrimSpace(p.Extract)
		if contents == "" {
			contents = "(This article has no introduction.)"
		}
		docs = append(docs, document{Title: p.Title, Metadata: documentMetadata{URL: w.pageURL(p)}, Contents: contents})
	}
	if len(docs) == 0 {
		return noResults(query), nil
	}
	return documentsJSON(docs, w.maxChars, w.limit), nil
}

// pageURL is the article's address: the one MediaWiki gave, or the
// canonical /wiki/Title form.
func (w *wikipedia) pageURL(p wikiPage) string {
	if p.FullURL != "" {
		return p.FullURL
	}
	return strings.TrimRight(w.base, "/") + "/wiki/" + url.PathEscape(strings.ReplaceAll(p.Title, " ", "_"))
}
