package agent

// Many chat templates served by llama.cpp and vLLM (Mistral, Llama 2,
// Gemma…) refuse a conversation whose roles do not alternate: "Conversation
// roles must alternate user/assistant/user/assistant/...". koe's context
// has places where two user messages meet: the persona right above the
// latest user message, the reminder after it, the note after an
// interrupted reply, and an earlier turn whose reply failed. alternate
// joins them, so every request suits every template.

// alternate returns msgs (the messages after the system prompt) with each
// run of user messages joined into one, their texts in order and separated
// by a blank line, and an assistant's text without tool calls joined to the
// assistant message that follows it, if any. An assistant's tool calls and
// their results stay as they are: with the answer after them they are the
// assistant's side of the turn. Templates that know tools (Mistral's)
// check the alternation without them, so one side must hold at most one
// assistant text outside a tool call: an answer after an answer, even
// with tool calls in between, is refused.
func alternate(msgs []WireMessage) []WireMessage {
	out := make([]WireMessage, 0, len(msgs))
	for _, m := range msgs {
		if n := len(out); n > 0 && sameSide(out[n-1], m) {
			out[n-1] = merge(out[n-1], m)
			continue
		}
		out = append(out, m)
	}
	return out
}

// sameSide reports whether b can continue a as one message: two user
// messages, or an assistant's text without calls and the assistant message
// after it (which may call tools: an assistant may speak and call at once).
// A message with tool calls is always followed by their results.
func sameSide(a, b WireMessage) bool {
	switch {
	case a.Role == RoleUser && b.Role == RoleUser:
		return true
	case a.Role == RoleAssistant && b.Role == RoleAssistant:
		return len(a.ToolCalls) == 0
	}
	return false
}

// merge appends b's content to a's, and takes b's tool calls. Plain texts
// stay plain; if either carries parts (images), the result is parts, with
// neighbouring texts joined so that the persona and the user's words share
// one text part.
func merge(a, b WireMessage) WireMessage {
	a.ToolCalls = b.ToolCalls
	if len(a.Parts) == 0 && len(b.Parts) == 0 {
		a.Content = joinText(a.Content, b.Content)
		return a
	}
	var parts []ContentPart
	for _, p := range append(partsOf(a), partsOf(b)...) {
		if p.ImageURL == "" {
			if p.Text == "" {
				continue
			}
			if n := len(parts); n > 0 && parts[n-1].ImageURL == "" {
				parts[n-1].Text = joinText(parts[n-1].Text, p.Text)
				continue
			}
		}
		parts = append(parts, p)
	}
	a.Content, a.Parts = "", parts
	return a
}

// partsOf is m's content as parts (a copy: merging never changes a
// message it was given).
func partsOf(m WireMessage) []ContentPart {
	if len(m.Parts) > 0 {
		return append([]ContentPart(nil), m.Parts...)
	}
	if m.Content == "" {
		return nil
	}
	return []ContentPart{{Text: m.Content}}
}
