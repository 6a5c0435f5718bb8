package realtime

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"koe/agent"
	"koe/conversation"
)

// A response is one turn of the session, asked for by response.create
// (or, with server VAD, by the end of the user's speech). Its events go
// out in the API's order:
//
//	response.created, rate_limits.updated            (when it is asked for)
//	response.output_item.added, conversation.item.added,
//	response.content_part.added                      (when the turn starts)
//	response.output_audio_transcript.delta and
//	response.output_audio.delta, or response.output_text.delta
//	response.output_audio.done, ...transcript.done or output_text.done,
//	response.content_part.done, response.output_item.done,
//	conversation.item.done, response.done            (when it ends)
//
// Deltas are written on the response's own context, which a cancel ends
// before the turn is stopped: what is queued then is never written, and
// what was written is what the user heard and what the history keeps.

// response is the running response's state, guarded by the Conn's lock.
type response struct {
	id     string
	ctx    context.Context // the deltas'; cancel ends it
	cancel context.CancelFunc
	audio  bool // spoken (with its transcript), or text
	format audioFormat
	voice  string
	maxOut int
	mods   []string
	itemID string
	prev   string // the item before the output item
	opened bool   // its item and content part were announced
	// msgIndex is the message item's output_index: it is announced with
	// the first words, after the tool calls made before them (a response
	// that only calls tools has none, as the API's have none).
	msgIndex int
	ended    bool // response.done was sent (or is being)
	text     strings.Builder
	heard    strings.Builder // of text: what was written to the client
	encoder  *audioEncoder
	// turn is the context of the turn's frames, from its chain-start:
	// frames of any other (a turn ending before this one began, the
	// session's own) are not this response's.
	turn    context.Context
	usage   agent.Usage // summed over the turn's LLM calls
	calls   int         // LLM calls that reported usage
	length  bool        // the model stopped at its token limit
	failure string      // the turn's failure, for response.done
	// toolItems are the items of the tool calls the model made, in order,
	// as they are (or will be) done: the client's function_call items
	// (functions.go) and koe's own tools' mcp_call items (servertools.go).
	// The message item sits among them at msgIndex. theirs names the client's functions;
	// running holds the calls of koe's own tools not yet returned.
	toolItems []ev
	theirs    map[string]bool
	running   map[string]serverCall
	// inputItem is the audio message whose recording the turn hears
	// first, and transcribed says it has been (input_events.go).
	inputItem   string
	transcribed bool
}

// responseCreate is response.create's response: per-response overrides.
type responseCreate struct {
	Instructions     *string         `json:"instructions"`
	Modalities       json.RawMessage `json:"modalities"`
	OutputModalities json.RawMessage `json:"output_modalities"`
	Temperature      json.RawMessage `json:"temperature"`
	MaxOutputTokens  json.RawMessage `json:"max_output_tokens"`
	MaxResponseOut   json.RawMessage `json:"max_response_output_tokens"`
	Conversation     *string         `json:"conversation"`
	Input            json.RawMessage `json:"input"`
	Voice            json.RawMessage `json:"voice"`
	OutputAudio      json.RawMessage `json:"output_audio_format"`
	Audio            *struct {
		Output *struct {
			Format json.RawMessage `json:"format"`
			Voice  json.RawMessage `json:"voice"`
		} `json:"output"`
	} `json:"audio"`
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

func init() {
	handle("response.create", (*Conn).responseCreate)
	handle("response.cancel", (*Conn).responseCancel)
}

// plan is a response as asked for: the session's settings with the
// response's overrides.
type plan struct {
	cfg sessionConfig
	// Raw overrides read by the client's tools (see rt-api notes).
	tools, toolChoice json.RawMessage
	// recording, if set, is the user's speech (16 kHz mono WAV) that
	// koe's speech recognition hears first: the turn's words.
	recording []byte
}

// overrides applies response.create's overrides to the session's settings.
func overrides(cfg sessionConfig, r *responseCreate) (plan, error) {
	p := plan{cfg: cfg}
	if r == nil {
		return p, nil
	}
	if r.Conversation != nil && *r.Conversation != "auto" && *r.Conversation != "" {
		return p, refuse(codeUnsupported, "response.conversation",
			"out-of-band responses (conversation \"none\") are not supported: every koe turn is part of the character's history")
	}
	if r.Input != nil && string(r.Input) != "null" {
		return p, refuse(codeUnsupported, "response.input",
			"a response's own input is not supported: add the items to the conversation with conversation.item.create")
	}
	u := sessionUpdate{Instructions: r.Instructions, Modalities: r.Modalities, OutputModalities: r.OutputModalities,
		Temperature: r.Temperature, MaxOutputTokens: r.MaxOutputTokens, MaxResponseOut: r.MaxResponseOut,
		Voice: r.Voice, OutputAudioFormat: r.OutputAudio}
	if r.Audio != nil && r.Audio.Output != nil {
		u.OutputAudioFormat = or(r.Audio.Output.Format, u.OutputAudioFormat)
		u.Voice = or(r.Audio.Output.Voice, u.Voice)
	}
	next, err := cfg.apply(u)
	if err != nil {
		if ce, ok := err.(*clientError); ok {
			ce.param = strings.Replace(ce.param, "session.", "response.", 1)
		}
		return p, err
	}
	p.cfg = next
	p.tools, p.toolChoice = r.Tools, r.ToolChoice
	return p, nil
}

// responseCreate serves response.create.
func (c *Conn) responseCreate(raw []byte, _ string) error {
	var e struct {
		Response *responseCreate `json:"response"`
	}
	if err := decode(raw, &e); err != nil {
		return err
	}
	p, err := overrides(c.config(), e.Response)
	if err != nil {
		return err
	}
	return c.startResponse(p)
}

// startResponse starts a response for the pending items: the turn runs
// in the session, and its frames come back through the sink. It fails
// while another response runs, as the API does.
func (c *Conn) startResponse(p plan) error {
	tools, err := p.clientTools(c.sess.Character().LLM.ToolLimit())
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.cur != nil {
		id := c.cur.id
		c.mu.Unlock()
		return refuse(codeActiveResponse, "", "response "+id+" is still running: wait for its response.done, or send response.cancel")
	}
	recording, inputItem := c.items.pendingRecording()
	user, system := c.items.takePending()
	ctx, cancel := context.WithCancel(c.ctx)
	r := &response{
		id: c.ids.next("resp"), ctx: ctx, cancel: cancel, audio: p.cfg.speaks(),
		format: p.cfg.outFormat, voice: p.cfg.voice, maxOut: p.cfg.maxTokens, mods: slices.Clone(p.cfg.modalities),
		theirs: functionNames(tools), inputItem: inputItem,
	}
	c.cur = r
	c.mu.Unlock()

	c.send(c.ctx, ev{"type": "response.created", "response": c.renderResponse(r, "in_progress", nil, nil)},
		// koe has no rate limits of the API's kind: one response at a
		// time per connection is the only one, and this says so.
		ev{"type": "rate_limits.updated", "rate_limits": []ev{{"name": "requests", "limit": 1, "remaining": 0, "reset_seconds": 0}}})

	// The session's (or response's) instructions, then the system items'.
	instructions := strings.TrimSpace(p.cfg.instructions + "\n\n" + system)
	opts := agent.ReplyOptions{Instructions: instructions, MaxTokens: p.cfg.maxTokens}
	if t := p.cfg.temperature; t != nil {
		f := float32(*t)
		opts.Temperature = &f
	}
	if p.recording == nil {
		p.recording = recording // the pending audio messages' (input_events.go)
	}
	err = c.sess.Respond(conversation.Response{Text: user, Reply: opts, TextOnly: !r.audio, Recording: p.recording, Tools: &tools})
	if err != nil {
		c.finish(r, "failed", err.Error())
		return err
	}
	return nil
}

// responseCancel serves response.cancel: the turn stops at once through
// koe's interrupt, and its history keeps what the client was sent.
func (c *Conn) responseCancel(raw []byte, _ string) error {
	var e struct {
		ResponseID string `json:"response_id"`
	}
	if err := decode(raw, &e); err != nil {
		return err
	}
	c.mu.Lock()
	r := c.cur
	c.mu.Unlock()
	if r == nil || e.ResponseID != "" && e.ResponseID != r.id {
		return refuse(codeNoActiveResponse, "response_id", "there is no response running to cancel")
	}
	c.cancelResponse(r, "client_cancelled")
	return nil
}

// cancelResponse stops r: nothing more of it is written, the turn is
// interrupted with what was written, and response.done says why (reason:
// "client_cancelled", or "turn_detected" when the user spoke over it).
func (c *Conn) cancelResponse(r *response, reason string) {
	r.cancel()
	c.mu.Lock()
	heard := r.heardText()
	c.mu.Unlock()
	// A spoken reply waits for the client's truncate to say how much of
	// it was played (truncate.go); a written one was read as written.
	if !r.audio || !c.sess.BargeIn() {
		c.sess.Interrupt(heard)
	}
	c.finishCancelled(r, reason)
}

// heardText is what the client was sent of the reply. Called locked.
func (r *response) heardText() string {
	if r.audio && r.encoder != nil {
		return r.encoder.heard()
	}
	return r.heard.String()
}

// renderResponse is the response object of response.created and
// response.done.
func (c *Conn) renderResponse(r *response, status string, details any, output []ev) ev {
	if output == nil {
		output = []ev{}
	}
	resp := ev{"id": r.id, "object": "realtime.response", "status": status, "status_details": details,
		"output": output, "usage": nil, "metadata": nil}
	if c.dialect.beta {
		resp["modalities"] = r.mods
		resp["voice"] = r.voice
		resp["output_audio_format"] = r.format.betaName()
		resp["max_output_tokens"] = maxTokensValue(r.maxOut)
	} else {
		resp["conversation_id"] = c.convID
		resp["output_modalities"] = r.mods
		resp["audio"] = ev{"output": ev{"format": r.format.gaForm(), "voice": r.voice}}
		resp["max_output_tokens"] = maxTokensValue(r.maxOut)
	}
	if r.calls > 0 {
		u := r.usage
		resp["usage"] = ev{
			"total_tokens": u.PromptTokens + u.CompletionTokens, "input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens,
			"input_token_details":  ev{"text_tokens": u.PromptTokens, "audio_tokens": 0, "cached_tokens": 0},
			"output_token_details": ev{"text_tokens": u.CompletionTokens, "audio_tokens": 0},
		}
	}
	return resp
}

// outputItem is the response's message item in a state.
func (c *Conn) outputItem(r *response, status, text string) ev {
	content := []ev{}
	if r.opened {
		if r.audio {
			content = append(content, ev{"type": c.dialect.contentType("audio"), "transcript": text})
		} else {
			content = append(content, ev{"type": c.dialect.contentType("text"), "text": text})
		}
	}
	return ev{"id": r.itemID, "object": "realtime.item", "type": "message", "status": status, "role": "assistant", "content": content}
}

// part is the response's content part.
func (r *response) part(text string) ev {
	if r.audio {
		return ev{"type": "audio", "transcript": text}
	}
	return ev{"type": "text", "text": text}
}

// open announces the response's item and content part: the turn began.
func (c *Conn) open(r *response) []ev {
	c.mu.Lock()
	if r.opened || r.ended {
		c.mu.Unlock()
		return nil
	}
	r.opened = true
	r.msgIndex = len(r.toolItems)
	r.itemID = c.ids.next("item")
	r.prev = c.items.last()
	// Rendered from the start: a conversation.item.retrieve while it is
	// being said shows it (with what was said so far, itemRetrieve).
	it := &item{id: r.itemID, typ: "message", role: "assistant", status: "in_progress", rendered: c.outputItem(r, "in_progress", "")}
	_, _ = c.items.insert(it, nil)
	if r.audio {
		r.encoder = newAudioEncoder(r.format)
	}
	c.mu.Unlock()
	added := c.outputItem(r, "in_progress", "")
	added["content"] = []ev{}
	return []ev{
		{"type": "response.output_item.added", "response_id": r.id, "output_index": r.msgIndex, "item": added},
		{"type": "conversation.item.added", "previous_item_id": nullable(r.prev), "item": added},
		{"type": "response.content_part.added", "response_id": r.id, "item_id": r.itemID, "output_index": r.msgIndex, "content_index": 0, "part": r.part("")},
	}
}

// finish ends r with status ("completed", "failed"), once.
func (c *Conn) finish(r *response, status, failure string) {
	c.mu.Lock()
	if r.ended {
		c.mu.Unlock()
		return
	}
	if failure == "" {
		failure = r.failure
	}
	if failure != "" {
		status = "failed"
	}
	text := r.text.String()
	if r.length && status == "completed" {
		status = "incomplete"
	}
	c.mu.Unlock()
	var details any
	switch status {
	case "failed":
		details = ev{"type": "failed", "error": ev{"type": "server_error", "code": "turn_failed", "message": failure}}
	case "incomplete":
		details = ev{"type": "incomplete", "reason": "max_output_tokens"}
	}
	itemStatus := "completed"
	if status != "completed" {
		itemStatus = "incomplete"
	}
	c.end(r, status, itemStatus, details, text)
}

// finishCancelled ends a cancelled r, once: its item holds what was heard.
func (c *Conn) finishCancelled(r *response, reason string) {
	c.mu.Lock()
	if r.ended {
		c.mu.Unlock()
		return
	}
	text := r.heardText()
	c.mu.Unlock()
	c.end(r, "cancelled", "incomplete", ev{"type": "cancelled", "reason": reason}, text)
}

// end sends r's closing events and frees the connection for the next
// response.
func (c *Conn) end(r *response, status, itemStatus string, details any, text string) {
	c.mu.Lock()
	if r.ended {
		c.mu.Unlock()
		return
	}
	r.ended = true
	if c.cur == r {
		c.cur = nil
	}
	if i := c.items.index(r.itemID); i >= 0 {
		c.items.settle(i, itemStatus, c.outputItem(r, itemStatus, text), len(text))
	}
	opened := r.opened
	c.mu.Unlock()

	var events []ev
	var done ev
	if opened {
		done = c.outputItem(r, itemStatus, text)
		at := ev{"response_id": r.id, "item_id": r.itemID, "output_index": r.msgIndex, "content_index": 0}
		if r.audio {
			events = append(events, with(at, ev{"type": "response.output_audio.done"}),
				with(at, ev{"type": "response.output_audio_transcript.done", "transcript": text}))
		} else {
			events = append(events, with(at, ev{"type": "response.output_text.done", "text": text}))
		}
		events = append(events,
			with(at, ev{"type": "response.content_part.done", "part": r.part(text)}),
			ev{"type": "response.output_item.done", "response_id": r.id, "output_index": r.msgIndex, "item": done},
			ev{"type": "conversation.item.done", "previous_item_id": nullable(r.prev), "item": done})
	}
	c.mu.Lock()
	output := slices.Clone(r.toolItems)
	if opened {
		output = slices.Insert(output, r.msgIndex, done)
	}
	resp := c.renderResponse(r, status, details, output)
	c.mu.Unlock()
	events = append(events, ev{"type": "response.done", "response": resp})
	// The deltas' context ends once everything before response.done is
	// written (a cancel has ended it already).
	c.sendThen(c.ctx, r.cancel, events...)
}

// with returns a copy of base with more's fields.
func with(base, more ev) ev {
	out := make(ev, len(base)+len(more))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// current returns the running response, or nil.
func (c *Conn) current() *response {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}
