package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"koe/agent"
	"koe/internal/quote"
)

var errIdle = errors.New("llm idle timeout")

// Stream sends req and calls onDelta for every content delta, in order,
// until the reply ends, and returns the usage the server reported (nil if
// it reported none). Cancelling ctx aborts the HTTP request at once, so
// the LLM server sees its connection closed and stops generating.
//
// Besides the server's own failures it ends with an *agent.LLMError when
// the server sends nothing for llm.idle_timeout (KindTimeout), when the
// reply runs past llm.max_reply_tokens (KindReplyTooLong; the deltas
// before stay delivered), and when the answer holds no text at all
// (KindEmptyReply). What it reads of the server is bounded
// (KindTooLarge): one line by llm.max_line_bytes, one delta by
// llm.max_delta_bytes, an error answer by llm.max_error_bytes.
func (c *Client) Stream(ctx context.Context, req agent.Request, onDelta func(string)) (agent.StreamResult, error) {
	r := c.chatRequest(req)
	r.Stream = true
	if c.cfg.StreamUsage {
		r.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}

	parent := ctx
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	idle := c.startIdle(c.cfg.IdleTimeout, func() { cancel(errIdle) })
	defer idle.pause()

	stream, err := c.api.CreateChatCompletionStream(ctx, r)
	if err != nil {
		return agent.StreamResult{}, c.requestFailed(req, c.streamFailed(ctx, parent, err, agent.KindUnreachable))
	}
	defer stream.Close()

	limit := replyLimit{tok: c.tok, max: c.cfg.ReplyTokenLimit(), uncounted: make([]byte, 0, agent.ReplyBytes)}
	var res agent.StreamResult
	var calls toolCalls
	parsed, text, finish := false, false, ""
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if !parsed && errors.Is(err, openai.ErrTooManyEmptyStreamMessages) {
				// Hundreds of lines and no event: a web page.
				return res, c.noText(stream.Header(), false, "")
			}
			return res, c.streamFailed(ctx, parent, err, agent.KindBrokenStream)
		}
		if err := parent.Err(); err != nil {
			// Chunks read ahead before the cancellation are not handed on.
			return res, err
		}
		parsed = true
		// The idle clock measures the server only: while onDelta runs (a
		// slow client's queue may be full), the server is not to blame.
		idle.pause()
		if resp.Usage != nil {
			res.Usage = &agent.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}
		}
		for _, ch := range resp.Choices {
			if ch.Index != 0 {
				continue
			}
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if len(tc.Function.Name)+len(tc.Function.Arguments) > c.maxDelta {
					return res, c.deltaTooLarge("one streamed tool call delta")
				}
				// A runaway call (endless arguments) is as long a reply
				// as endless text.
				if limit.exceededBy(tc.Function.Name + tc.Function.Arguments) {
					return res, c.llmError(agent.KindReplyTooLong, fmt.Sprintf("%d tokens", limit.max))
				}
				calls.add(tc)
			}
			if d := ch.Delta.Content; d != "" {
				if len(d) > c.maxDelta {
					return res, c.deltaTooLarge("one streamed text delta")
				}
				if limit.exceededBy(d) {
					return res, c.llmError(agent.KindReplyTooLong, fmt.Sprintf("%d tokens", limit.max))
				}
				text = true
				onDelta(d)
			}
		}
		idle.resume()
	}
	res.FinishReason = finish
	res.ToolCalls, err = calls.complete()
	if err != nil {
		return res, c.llmError(agent.KindBrokenStream, err.Error())
	}
	if !text && len(res.ToolCalls) == 0 {
		return res, c.noText(stream.Header(), parsed, finish)
	}
	return res, nil
}

// deltaTooLarge is the error for a delta past llm.max_delta_bytes. A real
// delta is a token or a few: a huge one would be counted (the tokenizer's
// time grows faster than its input) and sent on whole before
// llm.max_reply_tokens could stop it.
func (c *Client) deltaTooLarge(what string) error {
	return c.llmError(agent.KindTooLarge, fmt.Sprintf("%s ran past llm.max_delta_bytes (%s)", what, quote.Bytes(int64(c.maxDelta))))
}

// streamFailed explains why a stream could not start or go on: the idle
// clock ran out, the caller cancelled (passed through as ctx's error, not
// an LLM failure), or the server or network failed.
func (c *Client) streamFailed(ctx, parent context.Context, err error, kind agent.ErrorKind) error {
	if errors.Is(context.Cause(ctx), errIdle) {
		return &agent.LLMError{Kind: agent.KindTimeout, BaseURL: c.cfg.BaseURL, Model: c.cfg.Model, Err: err}
	}
	if perr := parent.Err(); perr != nil {
		return perr
	}
	return c.classify(err, kind)
}

// idleTimer is a stream's idle clock: it stands still between pause and
// resume.
type idleTimer interface {
	pause()
	resume()
}

// idleClock fires when the server has sent nothing for a while: a hung
// server then ends the turn with an error instead of leaving the client
// "Thinking..." forever. A zero timeout never fires.
type idleClock struct {
	timeout time.Duration
	timer   *time.Timer
}

func startIdleClock(timeout time.Duration, fire func()) idleTimer {
	c := &idleClock{timeout: timeout}
	if timeout > 0 {
		c.timer = time.AfterFunc(timeout, fire)
	}
	return c
}

func (c *idleClock) pause() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

func (c *idleClock) resume() {
	if c.timer != nil {
		c.timer.Reset(c.timeout)
	}
}

// uncountedBytes is how much reply text replyLimit gathers before it
// counts it: tokenizing every delta would cost a tokenizer call per token.
const uncountedBytes = 1024

// replyLimit watches a streamed reply's length. A token is at least one
// byte, so the tokens counted so far plus the bytes not yet counted bound
// the reply's length: text is counted only once that bound passes max or
// a kilobyte has gathered, and each byte is counted once.
type replyLimit struct {
	tok       *agent.Tokenizer
	max       int
	counted   int    // tokens of the text counted so far
	uncounted []byte // text since
}

// exceededBy adds delta to the reply and reports whether it is now longer
// than max tokens.
func (l *replyLimit) exceededBy(delta string) bool {
	l.uncounted = append(l.uncounted, delta...)
	if l.counted+len(l.uncounted) <= l.max && len(l.uncounted) < uncountedBytes {
		return false
	}
	// Counted apart, pieces may cost a token more at each cut than the
	// whole would: an estimate, like every count koe makes.
	l.counted += l.tok.Count(string(l.uncounted))
	l.uncounted = l.uncounted[:0]
	return l.counted > l.max
}

// toolCalls gathers a stream's tool-call fragments. OpenAI streams each
// call as a first fragment with its index, id and name, then fragments of
// its arguments with the index alone.
type toolCalls struct {
	byIndex map[int]*agent.ToolCall
	order   []int
}

func (t *toolCalls) add(tc openai.ToolCall) {
	i := 0
	if tc.Index != nil {
		i = *tc.Index
	}
	if t.byIndex == nil {
		t.byIndex = map[int]*agent.ToolCall{}
	}
	c, ok := t.byIndex[i]
	if !ok {
		c = &agent.ToolCall{}
		t.byIndex[i] = c
		t.order = append(t.order, i)
	}
	if tc.ID != "" {
		c.ID = tc.ID
	}
	c.Name += tc.Function.Name
	c.Arguments += tc.Function.Arguments
}

// complete returns the calls in index order. A call with no name cannot
// be run or answered: the stream was broken.
func (t *toolCalls) complete() ([]agent.ToolCall, error) {
	if len(t.order) == 0 {
		return nil, nil
	}
	idx := append([]int(nil), t.order...)
	slices.Sort(idx)
	out := make([]agent.ToolCall, 0, len(idx))
	for n, i := range idx {
		c := *t.byIndex[i]
		if c.Name == "" {
			return nil, fmt.Errorf("tool call %d of the stream came without a function name", i)
		}
		if c.ID == "" {
			// Some servers (older llama.cpp) send no ids; the tool
			// message must still answer a call by id.
			c.ID = fmt.Sprintf("call_%d", n)
		}
		out = append(out, c)
	}
	return out, nil
}
