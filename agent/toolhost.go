package agent

import (
	"context"
	"sync"
)

// ToolHost is what a running tool call may use of the turn that made it:
// the character's model (an MCP server's sampling asks it), a way to show
// progress and steps to the session's clients, and pictures for a model
// that sees them. Tools find it in their ctx with ToolHostOf. Its methods
// may be called from any goroutine, until the call returns; later calls
// do nothing.
type ToolHost struct {
	// Call is the call being run.
	Call ToolCall
	// LLM and Model are the character's; Vision says whether the model
	// takes images.
	LLM    LLM
	Model  string
	Vision bool

	index int
	notes chan<- toolNote
	done  <-chan struct{}
	// progress and status take the notes of a host made by NewToolHost.
	progress func(text string)
	status   func(task, state, text, details string)

	mu     sync.Mutex
	images []Image
}

// ToolProgressEmitter is a ToolEmitter that shows how far a running call
// is (a tool's progress reports). Its method is called from Reply's
// goroutine, in order, between the call's ToolStarted and ToolFinished.
type ToolProgressEmitter interface {
	ToolEmitter
	ToolProgress(call ToolCall, text string)
}

// toolNote is something a running call asks the turn to show.
type toolNote struct {
	index int
	// progress is the call's own progress; otherwise task, state, text
	// and details are a step of its own (a StatusEmitter's Status).
	progress                   bool
	task, state, text, details string
}

// toolNoteBuffer is how many notes may wait while Reply's goroutine is
// busy; more are dropped, as a progress report soon says more.
const toolNoteBuffer = 64

type toolHostKey struct{}

// ToolHostOf returns the host of the call ctx belongs to (nil outside a
// call the agent runs).
func ToolHostOf(ctx context.Context) *ToolHost {
	h, _ := ctx.Value(toolHostKey{}).(*ToolHost)
	return h
}

// NewToolHost makes the host of a call run outside Reply (a toolbox
// called directly): its progress and steps go to the functions given
// (nil: dropped), from the goroutines that report them.
func NewToolHost(call ToolCall, llm LLM, model string, vision bool, progress func(text string), status func(task, state, text, details string)) *ToolHost {
	return &ToolHost{Call: call, LLM: llm, Model: model, Vision: vision, progress: progress, status: status}
}

// WithToolHost returns ctx carrying h, for tests and callers that run a
// toolbox themselves.
func WithToolHost(ctx context.Context, h *ToolHost) context.Context {
	return context.WithValue(ctx, toolHostKey{}, h)
}

// Progress shows how far the call is, on the call's own entry.
func (h *ToolHost) Progress(text string) {
	h.send(toolNote{index: h.index, progress: true, text: text})
}

// Status shows a step the call takes (task names it, the same for its
// start and end; state is "start", "progress", "end" or "error").
func (h *ToolHost) Status(task, state, text, details string) {
	h.send(toolNote{index: h.index, task: task, state: state, text: text, details: details})
}

func (h *ToolHost) send(n toolNote) {
	switch {
	case h == nil:
		return
	case h.notes == nil && n.progress && h.progress != nil:
		h.progress(n.text)
		return
	case h.notes == nil && !n.progress && h.status != nil:
		h.status(n.task, n.state, n.text, n.details)
		return
	case h.notes == nil:
		return
	}
	select {
	case <-h.done:
	case h.notes <- n:
	default:
	}
}

// AddImages attaches pictures to the call's result; a model that sees
// images gets them with it. Only a host whose Vision is set keeps them.
func (h *ToolHost) AddImages(images ...Image) {
	if h == nil || !h.Vision {
		return
	}
	h.mu.Lock()
	h.images = append(h.images, images...)
	h.mu.Unlock()
}

// Images are the pictures attached so far, for a caller of a toolbox
// that runs it itself.
func (h *ToolHost) Images() []Image {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Image(nil), h.images...)
}

func (h *ToolHost) takeImages() []Image {
	h.mu.Lock()
	defer h.mu.Unlock()
	imgs := h.images
	h.images = nil
	return imgs
}

// deliver shows a note from a running call, from Reply's goroutine.
func deliver(n toolNote, calls []ToolCall, watcher ToolEmitter, status StatusEmitter) {
	if n.progress {
		if p, ok := watcher.(ToolProgressEmitter); ok {
			p.ToolProgress(calls[n.index], n.text)
		}
		return
	}
	if status != nil {
		status.Status(n.task, n.state, n.text, n.details)
	}
}

// toolImagesMessage carries the pictures tool calls returned, for a model
// that sees images. Chat APIs take images in user messages only, and a
// cycle's results must follow its calls unbroken, so they come after the
// cycle's last result, each group named by its tool.
func toolImagesMessage(results []Message) WireMessage {
	var parts []ContentPart
	for _, m := range results {
		parts = append(parts, ContentPart{Text: "[Images returned by the tool " + m.Name + " (call " + m.ToolCallID + "):]"})
		for _, img := range m.Images {
			if img.Data == "" {
				continue
			}
			parts = append(parts, ContentPart{ImageURL: "data:" + img.MimeType + ";base64," + img.Data, Detail: ImageDetailAuto})
		}
	}
	return WireMessage{Role: RoleUser, Parts: parts}
}
