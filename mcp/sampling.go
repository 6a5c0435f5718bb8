//lint:file-ignore SA1019 MCP deprecates logging and sampling from protocol 2026-07-28, but servers still sample this way; the issue asks for it, within a budget.

package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/agent"
)

// A sampling request (sampling/createMessage) asks the model for a
// completion. koe answers one only when the server's config allows it
// (sampling: true, without which koe does not offer it), while one of the
// server's tools runs for a character's turn: that character's model
// answers, and the turn's clients see a status while it does. Each server
// has a budget of requests and tokens per minute.

// defaultSamplingSystem stands in for a request without a system prompt:
// the character's own prompt is not the server's to use.
const defaultSamplingSystem = "You are a helpful assistant."

// budget is what a server's sampling spent over the last minute.
type budget struct {
	spent []*spend
	// n numbers the requests, for their status tasks.
	n int
}

type spend struct {
	at     time.Time
	tokens int
}

// reserve takes a request of about tokens from the server's budget, or
// says which limit it is over. The caller corrects the tokens once the
// model has answered.
func (h *hostState) reserve(now time.Time, tokens int) (*spend, int, error) {
	perMinute, tokensPerMinute, _ := h.cfg.samplingBudget()
	h.mu.Lock()
	defer h.mu.Unlock()
	b := &h.budget
	kept := b.spent[:0]
	for _, s := range b.spent {
		if now.Sub(s.at) < time.Minute {
			kept = append(kept, s)
		}
	}
	b.spent = kept
	if len(b.spent) >= perMinute {
		return nil, 0, fmt.Errorf("koe refused the sampling request: over this server's budget of %d requests a minute (sampling_requests_per_minute)", perMinute)
	}
	used := 0
	for _, s := range b.spent {
		used += s.tokens
	}
	if used+tokens > tokensPerMinute {
		return nil, 0, fmt.Errorf("koe refused the sampling request: about %d tokens would pass this server's budget of %d tokens a minute (sampling_tokens_per_minute; %d spent)", tokens, tokensPerMinute, used)
	}
	s := &spend{at: now, tokens: tokens}
	b.spent = append(b.spent, s)
	b.n++
	return s, b.n, nil
}

// settle sets what a request really cost.
func (h *hostState) settle(s *spend, tokens int) {
	h.mu.Lock()
	s.tokens = tokens
	h.mu.Unlock()
}

// sample answers a sampling request with the model of the character whose
// call is under way.
func (s *server) sample(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
	c := s.host.current()
	if c == nil || c.host.LLM == nil {
		s.log.Warn("MCP server's sampling request refused: none of its tools is running for a turn")
		return nil, errors.New("koe answers sampling requests only while one of this server's tools runs for a character's turn")
	}
	p := req.Params
	if p == nil {
		return nil, errors.New("a sampling request without params")
	}
	_, _, maxCap := s.cfg.samplingBudget()
	maxTokens := int(min(p.MaxTokens, int64(maxCap)))
	if maxTokens <= 0 {
		maxTokens = maxCap
	}
	msgs, chars, err := samplingMessages(p, c.host.Vision)
	if err != nil {
		s.log.Warn("MCP server's sampling request refused", "err", err)
		return nil, err
	}
	// A token is about four characters of text: what is reserved before
	// the model says what it used.
	entry, n, err := s.host.reserve(time.Now(), chars/4+maxTokens)
	if err != nil {
		s.log.Warn("MCP server's sampling request refused", "err", err)
		return nil, err
	}
	task := "sampling:" + s.name + ":" + strconv.Itoa(n)
	c.host.Status(task, "start", "MCP server "+s.name+" asks the model", "")
	s.log.Info("MCP server's sampling request", "tool", c.host.Call.Name, "model", c.host.Model,
		"messages", len(p.Messages), "chars", chars, "max_tokens", maxTokens)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The turn's end (an interrupt, the call's time limit) ends it too.
	defer context.AfterFunc(c.ctx, cancel)()
	r := agent.Request{Messages: msgs, MaxTokens: maxTokens}
	if p.Temperature > 0 {
		t := float32(p.Temperature)
		r.Temperature = &t
	}
	began := time.Now()
	text, usage, err := c.host.LLM.Complete(ctx, r)
	used := chars/4 + utf8.RuneCountInString(text)/4
	if usage != nil {
		used = usage.PromptTokens + usage.CompletionTokens
	}
	s.host.settle(entry, used)
	if err != nil {
		c.host.Status(task, "error", "MCP server "+s.name+"'s request to the model failed", err.Error())
		s.log.Warn("MCP server's sampling request failed", "err", err)
		return nil, fmt.Errorf("the model failed: %s", clip(err.Error(), 300))
	}
	c.host.Status(task, "end", "MCP server "+s.name+" got the model's answer", "")
	s.log.Info("MCP server's sampling request answered", "tokens", used, "took", time.Since(began).Round(time.Millisecond))
	return &sdk.CreateMessageResult{Content: &sdk.TextContent{Text: text}, Model: c.host.Model, Role: "assistant", StopReason: "endTurn"}, nil
}

// samplingMessages turns a request's messages into the model's, with its
// system prompt, and counts their text. Text goes as it is; images only
// to a model that sees them; anything else is refused.
func samplingMessages(p *sdk.CreateMessageParams, vision bool) ([]agent.WireMessage, int, error) {
	system := p.SystemPrompt
	if system == "" {
		system = defaultSamplingSystem
	}
	msgs := []agent.WireMessage{{Role: agent.RoleSystem, Content: system}}
	chars := utf8.RuneCountInString(system)
	if len(p.Messages) == 0 {
		return nil, 0, errors.New("a sampling request without messages")
	}
	for i, m := range p.Messages {
		if m == nil {
			return nil, 0, fmt.Errorf("message %d is empty", i+1)
		}
		role := string(m.Role)
		if role != agent.RoleUser && role != agent.RoleAssistant {
			return nil, 0, fmt.Errorf("message %d has role %q: only user and assistant", i+1, role)
		}
		switch c := m.Content.(type) {
		case *sdk.TextContent:
			msgs = append(msgs, agent.WireMessage{Role: role, Content: c.Text})
			chars += utf8.RuneCountInString(c.Text)
		case *sdk.ImageContent:
			if !vision || role != agent.RoleUser {
				return nil, 0, fmt.Errorf("message %d is an image: the character's model takes text only", i+1)
			}
			if !imageTypes[c.MIMEType] {
				return nil, 0, fmt.Errorf("message %d is an image of type %q: the model takes %s", i+1, c.MIMEType, "image/png, image/jpeg, image/webp or image/gif")
			}
			msgs = append(msgs, agent.WireMessage{Role: role, Parts: []agent.ContentPart{{
				ImageURL: "data:" + c.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(c.Data), Detail: agent.ImageDetailAuto,
			}}})
			// An image costs the model about as much as a page of text.
			chars += 4 * 1000
		default:
			return nil, 0, fmt.Errorf("message %d is %T: koe sends the model text (and images to a model that sees them)", i+1, m.Content)
		}
	}
	return msgs, chars, nil
}
