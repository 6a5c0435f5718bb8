// Package client talks to koe's chat API over HTTP: it streams a turn's
// events (tokens, task status, finished messages) as they happen, asks for
// a whole answer at once, stops a running turn, and reads histories.
//
// A Client is safe for concurrent use: a turn can be stopped from another
// goroutine while its stream is being read.
//
//	c, err := client.New("http://127.0.0.1:12393", client.WithToken(os.Getenv("KOE_AUTH_TOKEN")))
//	...
//	for ev, err := range c.Stream(ctx, protocol.ChatRequest{Message: "Hello!"}) {
//		if err != nil {
//			return err
//		}
//		if ev.Type == protocol.EventToken {
//			fmt.Print(ev.Token)
//		}
//	}
//
// Failures koe answers before a stream starts, and every failure of the
// other calls, are *APIError values carrying the HTTP status and koe's
// message.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"koe/protocol"
)

// DefaultMaxEventBytes bounds one event of a stream and one JSON answer
// unless WithMaxEventBytes says otherwise: far above any chat message, far
// below what would hurt the client's memory.
const DefaultMaxEventBytes = 16 << 20

// maxErrorBody bounds what is read of an error answer's body, and
// maxErrorMessage what of a body that is not koe's JSON becomes the
// message: a proxy's page is no message.
const (
	maxErrorBody    = 64 << 10
	maxErrorMessage = 500
)

// Client is a connection to one koe server.
type Client struct {
	base     string
	token    string
	http     *http.Client
	maxEvent int
	// retries and maxRetryWait: how a turn refused while koe drains is
	// sent again (retry.go).
	retries      int
	maxRetryWait time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends the token as `Authorization: Bearer <token>` on every
// request: what koe asks for when server.auth_token is set. "" sends none.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient sends the requests through hc (a proxy, TLS settings,
// a transport of your own). Its Timeout, if any, applies to whole
// streams too; prefer contexts for deadlines.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithMaxEventBytes bounds one line and one event of a stream, and the
// body of a JSON answer (DefaultMaxEventBytes when n <= 0).
func WithMaxEventBytes(n int) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxEvent = n
		}
	}
}

// New returns a client of the koe at baseURL, e.g. "http://127.0.0.1:12393"
// (a path prefix, as behind a reverse proxy, is kept).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: koe's URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: koe's URL %q must be http:// or https:// and name a host, e.g. http://127.0.0.1:12393", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: koe's URL %q must have no query or fragment (pass the token with WithToken)", baseURL)
	}
	c := &Client{
		base:         strings.TrimRight(u.String(), "/"),
		http:         http.DefaultClient,
		maxEvent:     DefaultMaxEventBytes,
		retries:      DefaultRetries,
		maxRetryWait: DefaultMaxRetryWait,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	return c, nil
}

// APIError is a request koe refused or failed: the HTTP status and the
// message of koe's {"error": "..."} body (or the status text when the body
// said nothing readable, e.g. from a proxy).
type APIError struct {
	StatusCode int
	Message    string
	// RetryAfter is the answer's Retry-After (0 without one), and Draining
	// says koe refused because it is shutting down or restarting: another
	// instance, or this one once restarted, takes the request.
	RetryAfter time.Duration
	Draining   bool
	// retryAfterSet: the answer had a readable Retry-After, which may be 0.
	retryAfterSet bool
}

func (e *APIError) Error() string {
	return fmt.Sprintf("koe answered %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Invoke runs one turn and returns its final answer, the ai message the
// stream's last message event would carry (tool calls and results are in
// the history). koe answers 502 when the LLM failed.
func (c *Client) Invoke(ctx context.Context, req protocol.ChatRequest) (*protocol.ChatMessage, error) {
	var msg protocol.ChatMessage
	if err := c.do(ctx, http.MethodPost, pathInvoke, req, &msg); err != nil {
		return nil, err
	}
	return &msg, nil
}

// Stop stops the running turn of a history. It reports false when no turn
// of that history was running (koe's 404), which is no error: the turn may
// have just ended. The stopped turn's stream then ends with its final ai
// message, marked interrupted.
func (c *Client) Stop(ctx context.Context, historyUID string) (bool, error) {
	if historyUID == "" {
		return false, errors.New("client: Stop needs a history_uid")
	}
	var res protocol.StopResult
	err := c.do(ctx, http.MethodPost, "/api/chat/"+url.PathEscape(historyUID)+"/stop", nil, &res)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return res.Stopped, nil
}

// Histories lists a character's histories, newest first.
func (c *Client) Histories(ctx context.Context, confUID string) ([]protocol.HistoryEntry, error) {
	if confUID == "" {
		return nil, errors.New("client: Histories needs a conf_uid (a message's additional_kwargs.conf_uid names the character it went to)")
	}
	var list protocol.HistoryList
	if err := c.do(ctx, http.MethodGet, "/api/histories/"+url.PathEscape(confUID), nil, &list); err != nil {
		return nil, err
	}
	return list.Histories, nil
}

// History reads messages of a history, oldest first: the newest limit of
// them older than the message with id before (before 0: the newest; limit
// 0: koe's default page). More in the answer says older ones exist.
func (c *Client) History(ctx context.Context, confUID, historyUID string, before uint64, limit int) (*protocol.ChatHistory, error) {
	if confUID == "" || historyUID == "" {
		return nil, errors.New("client: History needs a conf_uid and a history_uid")
	}
	path := "/api/histories/" + url.PathEscape(confUID) + "/" + url.PathEscape(historyUID)
	q := url.Values{}
	if before > 0 {
		q.Set("before", strconv.FormatUint(before, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var h protocol.ChatHistory
	if err := c.do(ctx, http.MethodGet, path, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// do sends a request with an optional JSON body and decodes a 200 answer
// into out.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.maxEvent)+1))
	if err != nil {
		return fmt.Errorf("client: reading the answer to %s %s: %w", method, path, err)
	}
	if len(data) > c.maxEvent {
		return fmt.Errorf("%w: the answer to %s %s is over %d bytes (client.WithMaxEventBytes)", errLimit, method, path, c.maxEvent)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: the answer to %s %s is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// Turn requests: the ones sent again when koe drains (retry.go).
const (
	pathStream = "/api/chat/stream"
	pathInvoke = "/api/chat/invoke"
)

// send sends a request and returns its 200 response; any other status is
// an *APIError, the response then closed. A turn koe refused while
// draining is sent again, up to c.retries times.
func (c *Client) send(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var data []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: encoding the request: %w", err)
		}
		data = b
	}
	retries := 0
	if method == http.MethodPost && (path == pathStream || path == pathInvoke) {
		retries = c.retries
	}
	trace, _ := ctx.Value(retryTraceKey{}).(func(Retry))
	for attempt := 1; ; attempt++ {
		resp, err := c.sendOnce(ctx, method, path, data, accept)
		var apiErr *APIError
		if err == nil || attempt > retries || !errors.As(err, &apiErr) || !apiErr.retryable() {
			return resp, err
		}
		wait := c.retryWait(apiErr)
		if trace != nil {
			trace(Retry{Attempt: attempt, Wait: wait, Refusal: apiErr})
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("client: %s %s: waiting to send it again (%w) after: %w", method, path, err, apiErr)
		}
	}
}

// sendOnce sends a request once; data is its JSON body (nil: none).
func (c *Client) sendOnce(ctx context.Context, method, path string, data []byte, accept string) (*http.Response, error) {
	var rd io.Reader
	if data != nil {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// readAPIError makes an *APIError of a refused request.
func readAPIError(resp *http.Response) *APIError {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{StatusCode: resp.StatusCode}
	e.RetryAfter, e.retryAfterSet = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	var body struct {
		Error    string `json:"error"`
		Draining bool   `json:"draining"`
	}
	isJSON := json.Unmarshal(data, &body) == nil
	e.Draining = isJSON && body.Draining
	switch {
	case isJSON && body.Error != "":
		e.Message = body.Error
	case len(bytes.TrimSpace(data)) > 0 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html"):
		e.Message = strings.TrimSpace(string(data))
		if len(e.Message) > maxErrorMessage {
			e.Message = strings.ToValidUTF8(e.Message[:maxErrorMessage], "") + "…"
		}
	default:
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}
