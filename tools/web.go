package tools

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"koe/internal/quote"
)

// Defaults of the web tools' HTTP settings.
const (
	DefaultMaxResponseBytes = 2 << 20
	DefaultUserAgent        = "koe (voice conversation server; tools)"
)

// HTTPSettings are what the web tools' requests share (tools.http).
type HTTPSettings struct {
	// MaxResponseBytes bounds the body of one answer (0:
	// DefaultMaxResponseBytes): a larger one is a tool error, not memory.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// UserAgent is sent with every request (empty: DefaultUserAgent).
	// Public APIs such as Wikipedia's ask clients to say who they are.
	UserAgent string `yaml:"user_agent"`
}

func (s HTTPSettings) check() error {
	if s.MaxResponseBytes < 0 {
		return fmt.Errorf("tools.http.max_response_bytes %d is negative (default %d)", s.MaxResponseBytes, DefaultMaxResponseBytes)
	}
	if strings.ContainsAny(s.UserAgent, "\r\n") {
		return errors.New("tools.http.user_agent must be one line")
	}
	return nil
}

func (s HTTPSettings) withDefaults() HTTPSettings {
	if s.MaxResponseBytes == 0 {
		s.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if s.UserAgent == "" {
		s.UserAgent = DefaultUserAgent
	}
	return s
}

// defaultHTTPClient serves every box built without a client of its own,
// so that sessions share one connection pool. The call's ctx bounds a
// request as a whole; these timeouts only stop a dead server from holding
// a connection when a caller passed a ctx without a deadline.
var defaultHTTPClient = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 30 * time.Second
	t.MaxIdleConnsPerHost = 4
	return &http.Client{Transport: t, Timeout: 2 * time.Minute}
})

// webClient makes the requests of one web tool and turns every way they
// fail into a short error the model can read.
type webClient struct {
	client   *http.Client
	settings HTTPSettings
	// service names the remote side in errors, e.g. "the weather service".
	service string
}

func newWebClient(opts Options, service string) webClient {
	c := opts.HTTPClient
	if c == nil {
		c = defaultHTTPClient()
	}
	return webClient{client: c, settings: opts.HTTP.withDefaults(), service: service}
}

// getJSON GETs u and decodes its JSON answer into dst.
func (w webClient) getJSON(ctx context.Context, u string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%s: bad request URL: %w", w.service, err)
	}
	return w.do(req, dst)
}

// postJSON POSTs body as JSON to u with the given headers and decodes the
// JSON answer into dst.
func (w webClient) postJSON(ctx context.Context, u string, header http.Header, body, dst any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s: the request could not be written: %w", w.service, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: bad request URL: %w", w.service, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return w.do(req, dst)
}

func (w webClient) do(req *http.Request, dst any) error {
	ctx := req.Context()
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", w.settings.UserAgent)
	resp, err := w.client.Do(req)
	if err != nil {
		return w.transportError(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, w.settings.MaxResponseBytes+1))
	if err != nil {
		return w.transportError(ctx, err)
	}
	if int64(len(body)) > w.settings.MaxResponseBytes {
		return fmt.Errorf("%s sent more than %s, the limit of tools.http.max_response_bytes", w.service, quote.Bytes(w.settings.MaxResponseBytes))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("%s answered HTTP %s", w.service, statusLine(resp))
		if reason := bodyReason(body); reason != "" {
			msg += ": " + reason
		}
		return &statusError{code: resp.StatusCode, msg: msg}
	}
	if looksLikeHTML(body) {
		msg := w.service + " sent a web page, not JSON"
		if title := htmlTitle(body); title != "" {
			msg += fmt.Sprintf(" (%q)", title)
		}
		return errors.New(msg + ": is its URL right?")
	}
	if err := json.Unmarshal(body, dst); err != nil {
		var syntax *json.SyntaxError
		var shape *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return fmt.Errorf("%s sent a reply that is not JSON (%v)", w.service, err)
		case errors.As(err, &shape):
			// encoding/json's own message spells out Go types.
			return fmt.Errorf("%s sent JSON of an unexpected shape (%s is %s, not %s)",
				w.service, cmp.Or(shape.Field, "the whole"), withArticle(shape.Value), jsonKindOf(shape.Type))
		}
		return fmt.Errorf("%s sent JSON this tool cannot read (%v)", w.service, err)
	}
	return nil
}

// jsonKindOf names the JSON a Go type takes.
func jsonKindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Pointer:
		return jsonKindOf(t.Elem())
	}
	return "a number"
}

// statusError is an answer with an error status, for callers that know
// what a status means for their API.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// transportError says why a request got no answer; a ctx that ended is
// the reason whatever the transport made of it.
func (w webClient) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctxError(ctx.Err())
	}
	reason := err
	var ue *url.Error
	if errors.As(err, &ue) {
		// The whole URL would repeat the query the model just wrote.
		reason = ue.Err
	}
	return &toolError{msg: fmt.Sprintf("%s could not be reached: %s", w.service, clipTo(reason.Error(), 160)), cause: err}
}

func statusLine(resp *http.Response) string {
	if text := http.StatusText(resp.StatusCode); text != "" {
		return fmt.Sprintf("%d %s", resp.StatusCode, text)
	}
	return fmt.Sprint(resp.StatusCode)
}

// bodyReason finds a short reason in an error answer: the message of a
// JSON error in the shapes APIs use, an HTML page's title, or the first
// line of plain text.
func bodyReason(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	if looksLikeHTML(body) {
		return htmlTitle(body)
	}
	var v any
	if json.Unmarshal(body, &v) == nil {
		return clipTo(jsonReason(v, 0), 160)
	}
	line, _, _ := bytes.Cut(body, []byte("\n"))
	return clipTo(strings.ToValidUTF8(string(line), "�"), 160)
}

// jsonReason looks for the message in an error object: Open-Meteo's
// {"reason"}, MediaWiki's {"error":{"info"}}, Tavily's
// {"detail":{"error"}}, and the common {"error":"…"} and {"message"}.
func jsonReason(v any, depth int) string {
	obj, ok := v.(map[string]any)
	if !ok || depth > 3 {
		return ""
	}
	for _, key := range []string{"reason", "info", "message", "error", "detail", "description"} {
		switch f := obj[key].(type) {
		case string:
			if s := strings.TrimSpace(f); s != "" {
				return s
			}
		case map[string]any:
			if s := jsonReason(f, depth+1); s != "" {
				return s
			}
		}
	}
	return ""
}

func looksLikeHTML(body []byte) bool {
	head := bytes.ToLower(bytes.TrimSpace(body[:min(len(body), 512)]))
	return bytes.HasPrefix(head, []byte("<!doctype html")) || bytes.HasPrefix(head, []byte("<html")) ||
		bytes.HasPrefix(head, []byte("<head")) || bytes.HasPrefix(head, []byte("<body")) ||
		bytes.HasPrefix(head, []byte("<?xml")) && bytes.Contains(head, []byte("<html"))
}

var titleTag = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
})

// htmlTitle is an HTML page's title, one short line: what a proxy's or a
// server's error page says about itself.
func htmlTitle(body []byte) string {
	m := titleTag().FindSubmatch(body[:min(len(body), 64<<10)])
	if m == nil {
		return ""
	}
	return clipTo(strings.Join(strings.Fields(html.UnescapeString(strings.ToValidUTF8(string(m[1]), "�"))), " "), 120)
}

// checkBaseURL checks the URL of a service in the configuration.
func checkBaseURL(key, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%s %q is not an http or https URL without a query", key, raw)
	}
	return nil
}

// endpoint joins a base URL from the configuration, a path and a query.
func endpoint(base, path string, query url.Values) string {
	u := strings.TrimRight(base, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u
}
