package agent

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Roles of memory messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleTool      = "tool"
)

// ToolCall is one function call the assistant asked for.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON, as the model wrote it
}

// Image is a picture attached to a user message.
type Image struct {
	Source   string // camera, screen, clipboard, upload
	MimeType string // image/jpeg, image/png, image/webp, image/gif
	Data     string // base64, without the data: prefix
}

// Message is the agent's rich internal message: what the conversation
// layer and the stores see. The LLM wire shape is built only at the edge.
type Message struct {
	Role    string
	Content string
	// Images ride in a user message as content parts, in the turn they
	// were attached to only (see wire).
	Images []Image
	// Files attached before a user message ride with it, as numbered
	// documents ahead of its text.
	Files []File
	// ToolCalls are set on an assistant message that calls tools; such a
	// message does not end its turn.
	ToolCalls []ToolCall
	// ToolCallID and Name are set on a tool result.
	ToolCallID string
	Name       string
	// Interrupted marks an assistant reply the user cut off; Content is the
	// part they heard.
	Interrupted bool
	Time        time.Time
}

// endsTurn reports whether m is a turn's final assistant message.
func (m Message) endsTurn() bool {
	return m.Role == RoleAssistant && len(m.ToolCalls) == 0
}

// chars is what m weighs for compression statistics.
func (m Message) chars() int {
	n := len([]rune(m.Content))
	for _, c := range m.ToolCalls {
		n += len([]rune(c.Name)) + len([]rune(c.Arguments))
	}
	return n
}

// imageMode says how a message's images reach the model.
type imageMode int

const (
	imagesAsParts imageMode = iota // the current turn, a model that sees images
	imagesGone                     // an earlier turn: a note, so base64 is never resent
	imagesUnseen                   // a model that cannot see: a note saying so
)

// wire converts m to the shape the LLM edge sends.
func (m Message) wire(images imageMode) WireMessage {
	w := WireMessage{Role: m.Role, ToolCallID: m.ToolCallID, Name: m.Name}
	if m.Role == RoleAssistant {
		// A reasoning model's earlier thinking is shown to users and kept
		// in history, but sending it back only spends the context.
		m.Content = StripThink(m.Content)
	}
	if len(m.Files) > 0 {
		m.Content = joinText(filesText(m.Files), m.Content)
	}
	switch {
	case len(m.Images) == 0:
		w.Content = m.Content
	case images == imagesAsParts:
		// An image restored from a history has no bytes in memory (the
		// store keeps them apart): it gets the note of an earlier turn.
		var gone []Image
		w.Parts = []ContentPart{{Text: m.Content}}
		for _, img := range m.Images {
			if img.Data == "" {
				gone = append(gone, img)
				continue
			}
			w.Parts = append(w.Parts, ContentPart{
				ImageURL: "data:" + img.MimeType + ";base64," + img.Data,
				Detail:   ImageDetailAuto,
			})
		}
		w.Parts[0].Text += imageNotes(gone, imagesGone)
	default:
		w.Content = m.Content + imageNotes(m.Images, images)
	}
	w.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
	return w
}

// filesText is the files shared with a message as the documents JSON.
func filesText(files []File) string {
	docs := make([]Document, len(files))
	for i, f := range files {
		docs[i] = f.document()
	}
	return DocumentsJSON(docs)
}

// thinkBlock matches <think>…</think>, and an unclosed one at the end
// (a reply interrupted while thinking).
var thinkBlock = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?is)<think>.*?(</think>|$)`)
})

// StripThink removes a reasoning model's <think>…</think> blocks: what the
// model thought is not what it said.
func StripThink(s string) string {
	if !strings.Contains(strings.ToLower(s), "<think>") {
		return s
	}
	return strings.TrimSpace(thinkBlock().ReplaceAllString(s, ""))
}

// imageNotes stands in for images the request does not carry.
func imageNotes(images []Image, mode imageMode) string {
	var b strings.Builder
	for _, img := range images {
		src := img.Source
		if src == "" {
			src = "attached"
		}
		if mode == imagesUnseen {
			fmt.Fprintf(&b, "\n[The user shared a %s image, but you cannot see images. If it matters, say so briefly.]", src)
		} else {
			fmt.Fprintf(&b, "\n[The user shared a %s image here; it is no longer available.]", src)
		}
	}
	return b.String()
}

// turn is one user message, every tool call and result that followed it,
// and the final assistant message (an assistant message without tool calls).
type turn struct {
	Index    int // 1-based position of the turn in its history
	Messages []Message
}

// Complete reports whether the turn has its final assistant message.
func (t turn) Complete() bool {
	return len(t.Messages) > 0 && t.Messages[len(t.Messages)-1].endsTurn()
}

// Chars is the turn's size for compression statistics.
func (t turn) Chars() int {
	n := 0
	for _, m := range t.Messages {
		n += m.chars()
	}
	return n
}

// splitTurns groups messages into turns: each user message starts one.
// Anything before the first user message (there should be nothing) is
// dropped, since it cannot be placed in a turn.
//
// It runs for every request over the whole history, so it allocates twice
// whatever the history's length: the turns, and one array that holds every
// turn's messages in order. Each turn's Messages is capped at its own end,
// so that appending to one cannot write over the next.
func splitTurns(msgs []Message) []turn {
	users := 0
	for _, m := range msgs {
		if m.Role == RoleUser {
			users++
		}
	}
	if users == 0 {
		return nil
	}
	turns := make([]turn, 0, users)
	all := make([]Message, 0, len(msgs))
	start := 0
	for _, m := range msgs {
		if m.Role == RoleUser {
			turns = append(turns, turn{Index: len(turns) + 1})
			start = len(all)
		}
		if len(turns) == 0 || m.Role == RoleSystem {
			continue
		}
		all = append(all, m)
		turns[len(turns)-1].Messages = all[start:len(all):len(all)]
	}
	return turns
}
