package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/agent"
)

// toolbox is the tools of the servers a character enabled.
type toolbox struct {
	servers        []*server
	maxResultChars int
}

// Specs lists the tools of the servers that are connected now. The caller
// owns the slice and its contents.
func (tb *toolbox) Specs() []agent.ToolSpec {
	var specs []agent.ToolSpec
	for _, s := range tb.servers {
		c, _ := s.snapshot()
		if c == nil {
			continue
		}
		for _, t := range c.tools {
			spec := t.spec
			spec.Parameters = slices.Clone(t.spec.Parameters)
			specs = append(specs, spec)
		}
	}
	if spec, ok := tb.resourceToolSpec(); ok {
		specs = append(specs, spec)
	}
	return specs
}

// Call runs one call on the server whose tool it names. A server that is
// down, a tool result marked isError, a timeout and a cancelled ctx are
// errors for the model; a cancelled ctx's error stays reachable with
// errors.Is, and the server is told the call was cancelled.
func (tb *toolbox) Call(ctx context.Context, call agent.ToolCall) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", ctxError(err)
	}
	if call.Name == ReadResourceTool {
		return tb.readResourceCall(ctx, call)
	}
	s := tb.serverFor(call.Name)
	if s == nil {
		return "", tb.unknownTool(call.Name)
	}
	c, st := s.snapshot()
	if c == nil {
		return "", notConnected(s.name, st)
	}
	i := slices.IndexFunc(c.tools, func(t tool) bool { return t.spec.Name == call.Name })
	if i < 0 {
		return "", tb.unknownTool(call.Name)
	}
	args, err := arguments(call.Arguments)
	if err != nil {
		return "", err
	}
	// The time the user takes to answer the server's question does not
	// count (agent.WithCallTimeout).
	callCtx, cancel := agent.WithCallTimeout(context.WithValue(ctx, callKey{}, call), s.cfg.timeout())
	defer cancel()
	defer s.asking.during(callCtx, call, "MCP server "+s.name)()
	// A session that ends (a crash, Close) ends its calls: closing it
	// would otherwise wait for them.
	defer context.AfterFunc(c.live, cancel)()
	params := &sdk.CallToolParams{Name: c.tools[i].name, Arguments: args}
	// A call from a turn may be told of (progress) and asked for
	// (sampling) while it runs (host.go).
	host := agent.ToolHostOf(ctx)
	token, end := s.host.begin(host, callCtx)
	defer end()
	if token != "" {
		params.SetProgressToken(token)
	}
	res, err := c.session.CallTool(callCtx, params)
	switch {
	case ctx.Err() != nil:
		return "", ctxError(ctx.Err())
	case err != nil && c.live.Err() != nil:
		if st := s.stateNow(); st != stateConnected {
			return "", notConnected(s.name, st)
		}
		return "", notConnected(s.name, stateRestarting)
	case err != nil && callCtx.Err() != nil:
		// Not wrapping DeadlineExceeded: the caller would take it for
		// its own time limit.
		return "", fmt.Errorf("MCP server %s did not answer within %s (mcp_servers.%s.timeout)", s.name, s.cfg.timeout(), s.name)
	case errors.Is(err, sdk.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// The server went away during the call.
		return "", notConnected(s.name, stateRestarting)
	case err != nil:
		return "", fmt.Errorf("MCP server %s: %s", s.name, clip(err.Error(), 300))
	case res.IsError:
		text := strings.TrimSpace(resultText(res))
		if text == "" {
			text = "the tool failed without saying why"
		}
		return "", errors.New(cut(text, tb.maxResultChars))
	}
	s.resolveLinks(ctx, res)
	return cut(resultText(res)+showImages(host, res, s.host.limits), tb.maxResultChars), nil
}

func (tb *toolbox) serverFor(name string) *server {
	server, ok := serverOf(name)
	if !ok {
		return nil
	}
	for _, s := range tb.servers {
		if s.name == server {
			return s
		}
	}
	return nil
}

func (tb *toolbox) unknownTool(name string) error {
	var names []string
	for _, spec := range tb.Specs() {
		names = append(names, spec.Name)
	}
	if len(names) == 0 {
		return fmt.Errorf("unknown tool %q: no MCP tools are available now", clip(name, 80))
	}
	return fmt.Errorf("unknown tool %q (available: %s)", clip(name, 80), clip(strings.Join(names, ", "), 400))
}

func notConnected(server string, st state) error {
	return fmt.Errorf("MCP server %s is not connected (%s)", server, st)
}

// arguments checks that the model wrote a JSON object, the only arguments
// a tool takes; none at all is the empty object.
func arguments(s string) (json.RawMessage, error) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if !json.Valid(b) || b[0] != '{' {
		return nil, fmt.Errorf("the arguments are not a JSON object: %s", clip(s, 80))
	}
	return b, nil
}

// ctxCause is a cancelled call with a message of its own for the model and
// the context's error kept for errors.Is.
type ctxCause struct {
	msg   string
	cause error
}

func (e *ctxCause) Error() string { return e.msg }
func (e *ctxCause) Unwrap() error { return e.cause }

func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &ctxCause{msg: "the tool call timed out", cause: err}
	}
	return &ctxCause{msg: "the tool call was cancelled", cause: err}
}
