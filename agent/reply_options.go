package agent

import "context"

// ReplyOptions change one reply without changing the agent: what a client
// of the Realtime API sets for its session or for one response. They
// travel in the reply's context (WithReplyOptions) because they belong to
// that call alone; the agent's own options stay the character's.
type ReplyOptions struct {
	// Instructions are read by the model with the system prompt of every
	// request of the reply, after the date and the tools note.
	Instructions string
	// Temperature, if set, overrides the character's for the reply.
	Temperature *float32
	// MaxTokens, if > 0, bounds each LLM call of the reply below the
	// character's own limit.
	MaxTokens int
}

type replyOptionsKey struct{}

// WithReplyOptions returns ctx carrying o for Agent.Reply.
func WithReplyOptions(ctx context.Context, o ReplyOptions) context.Context {
	return context.WithValue(ctx, replyOptionsKey{}, o)
}

// replyOptionsOf returns the options ctx carries (none: the zero value).
func replyOptionsOf(ctx context.Context) ReplyOptions {
	o, _ := ctx.Value(replyOptionsKey{}).(ReplyOptions)
	return o
}

// apply puts the options into a request the agent built.
func (o ReplyOptions) apply(req *Request) {
	if o.Temperature != nil && req.Temperature == nil {
		t := *o.Temperature
		req.Temperature = &t
	}
	if o.MaxTokens > 0 && (req.MaxTokens == 0 || o.MaxTokens < req.MaxTokens) {
		req.MaxTokens = o.MaxTokens
	}
}

// note is the instructions as they join the system prompt's dynamic part.
func (o ReplyOptions) note() string {
	if o.Instructions == "" {
		return ""
	}
	return "\n\n" + o.Instructions
}
