package chatcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"koe/client"
	"koe/protocol"
)

// Marks the view puts before its lines. Answers are koe's whichever
// character speaks: a name known only once the first answer ended would
// change in the middle of the first turn.
const (
	userPrompt      = "you> "
	answerPrompt    = "koe> "
	markRunning     = "⋯"
	markDone        = "✓"
	markFailed      = "✗"
	markResult      = "  ↳ "
	markInterrupted = "⏹"
	markReconnect   = "⚡"
)

// spinnerFrames animate the line of a running task on a terminal.
var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Limits of what the view shows of a tool call: a tool's arguments or
// result can be pages long, and the history keeps them whole.
const (
	maxArgsShown   = 120
	maxResultLines = 6
	maxResultChars = 600
)

// view shows a turn's events. On a terminal (animate) the running task's
// line is a spinner, redrawn in place; elsewhere every line is written
// once, so a log or a pipe reads as a plain transcript. One goroutine owns
// a view: nothing in it is shared.
type view struct {
	out     io.Writer
	animate bool

	atLineStart bool
	spinnerOn   bool // a spinner line is drawn and must be erased first
	frame       int
	// tasks are the running tasks, oldest first; the spinner shows the
	// newest.
	tasks []task
	// calls are this turn's tool calls by id, to name a tool's task.
	calls map[string]protocol.ChatToolCall
	// answering: the current cycle's tokens are being written on an
	// answer line; streamed is what they said.
	answering bool
	streamed  strings.Builder
}

type task struct{ id, label string }

func newView(out io.Writer, animate bool) *view {
	return &view{out: out, animate: animate, atLineStart: true}
}

// write writes s after the spinner line, if any, was erased.
func (v *view) write(s string) {
	if s == "" {
		return
	}
	v.eraseSpinner()
	_, _ = io.WriteString(v.out, s)
	v.atLineStart = strings.HasSuffix(s, "\n")
}

// line writes s on a line of its own.
func (v *view) line(s string) {
	v.endAnswer()
	if !v.atLineStart {
		v.write("\n")
	}
	v.write(s + "\n")
}

// endAnswer ends the answer line being written, if any.
func (v *view) endAnswer() {
	if v.answering {
		v.answering = false
		if !v.atLineStart {
			v.write("\n")
		}
	}
}

func (v *view) eraseSpinner() {
	if v.spinnerOn {
		v.spinnerOn = false
		_, _ = io.WriteString(v.out, "\r\x1b[K")
	}
}

// tick advances the spinner; it is drawn only on a line of its own, never
// over an answer being written.
func (v *view) tick() {
	if !v.animate || len(v.tasks) == 0 || v.answering || !v.atLineStart {
		return
	}
	v.frame = (v.frame + 1) % len(spinnerFrames)
	v.drawSpinner()
}

func (v *view) drawSpinner() {
	if !v.animate || len(v.tasks) == 0 || v.answering || !v.atLineStart {
		return
	}
	label := v.tasks[len(v.tasks)-1].label
	_, _ = fmt.Fprintf(v.out, "\r\x1b[K%s %s", spinnerFrames[v.frame], label)
	v.spinnerOn = true
}

// show shows one event of a turn.
func (v *view) show(ev client.Event) {
	switch ev.Type {
	case protocol.EventToken:
		v.token(ev.Token)
	case protocol.EventStatus:
		v.status(ev.Status)
	case protocol.EventMessage:
		v.message(ev.Message)
	case protocol.EventCitations:
		v.citations(ev.Citations)
	case protocol.EventError:
		v.line("error: " + ev.Error)
	case protocol.EventEnd:
		v.endAnswer()
		v.tasks = nil
		v.eraseSpinner()
	}
	v.drawSpinner()
}

// citations lists the documents the answer cites, under it.
func (v *view) citations(c *protocol.CitationsBody) {
	for _, d := range c.Citations {
		where := d.File
		if where == "" {
			where = d.URL
		}
		switch {
		case d.Page > 0 && where != "":
			where = fmt.Sprintf("%s, page %d", where, d.Page)
		case d.Page > 0:
			where = fmt.Sprintf("page %d", d.Page)
		}
		if d.Section != "" {
			if where != "" {
				where += ", "
			}
			where += d.Section
		}
		text := fmt.Sprintf("  [%d] %s", d.Document, d.Title)
		if where != "" && where != d.Title {
			text += " (" + where + ")"
		}
		v.line(text)
	}
}

func (v *view) token(s string) {
	v.streamed.WriteString(s)
	if !v.answering {
		// A cycle after a tool call starts with the space that joins
		// it to the text before the call; its line needs none.
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		if !v.atLineStart {
			v.write("\n")
		}
		v.write(answerPrompt)
		v.answering = true
	}
	v.write(s)
}

func (v *view) status(s *protocol.StatusBody) {
	switch s.State {
	case protocol.StatusStart:
		if strings.HasPrefix(s.TaskID, "llm:") {
			v.endAnswer()
			v.streamed.Reset()
		}
		t := task{id: s.TaskID, label: v.label(s)}
		v.tasks = append(v.tasks, t)
		if !v.animate && !strings.HasPrefix(s.TaskID, "llm:") {
			v.line(markRunning + " " + t.label)
		}
	case protocol.StatusProgress:
		for i := range v.tasks {
			if v.tasks[i].id == s.TaskID && s.Content != "" {
				v.tasks[i].label = v.label(s) + ": " + s.Content
			}
		}
		if !v.animate && s.Content != "" {
			v.line(markRunning + " " + s.Content)
		}
	case protocol.StatusEnd, protocol.StatusError:
		label := v.label(s)
		for i, t := range v.tasks {
			if t.id == s.TaskID {
				label = t.label
				v.tasks = append(v.tasks[:i], v.tasks[i+1:]...)
				break
			}
		}
		if s.State == protocol.StatusError {
			v.line(markFailed + " " + label + failure(s))
			return
		}
		// An LLM cycle's result is its answer, shown as it streamed; its
		// line ends with the message that follows.
		if strings.HasPrefix(s.TaskID, "llm:") {
			return
		}
		v.line(markDone + " " + label)
	}
}

// failure is what a failed task says about its failure.
func failure(s *protocol.StatusBody) string {
	switch {
	case s.ErrorDetails != "":
		return ": " + s.ErrorDetails
	case s.Content != "":
		return ": " + s.Content
	}
	return ""
}

// label names a task: a tool call by its tool and arguments, an LLM cycle
// as thinking.
func (v *view) label(s *protocol.StatusBody) string {
	if id, ok := strings.CutPrefix(s.TaskID, "tool:"); ok {
		if call, ok := v.calls[id]; ok {
			return callText(call)
		}
	}
	if strings.HasPrefix(s.TaskID, "llm:") {
		return "thinking"
	}
	if s.Content != "" {
		return s.Content
	}
	return s.TaskID
}

// callText is a tool call as one short line: its name and arguments.
func callText(c protocol.ChatToolCall) string {
	args := string(c.Args)
	var compact bytes.Buffer
	if json.Compact(&compact, c.Args) == nil {
		args = compact.String()
	}
	if args == "{}" || args == "null" {
		args = ""
	}
	return strings.TrimSpace(c.Name + " " + shorten(args, maxArgsShown))
}

func (v *view) message(m *protocol.ChatMessage) {
	switch m.Type {
	case protocol.MessageAI:
		for _, c := range m.ToolCalls {
			if v.calls == nil {
				v.calls = map[string]protocol.ChatToolCall{}
			}
			v.calls[c.ID] = c
		}
		v.finishAnswer(m.Content)
		v.endAnswer()
		if m.AdditionalKwargs.Interrupted {
			v.line(markInterrupted + " interrupted")
		} else if m.ResponseMetadata.FinishReason == "length" {
			v.line(markInterrupted + " cut off: the reply reached the model's length limit")
		}
	case protocol.MessageTool:
		v.line(markResult + result(m))
	}
}

// finishAnswer makes the answer line show the message's text: the tokens
// did, unless koe sent none (stream_tokens false), or kept more than it
// streamed (a stopped turn keeps what the LLM had written).
func (v *view) finishAnswer(content string) {
	text := strings.TrimSpace(content)
	shown := strings.TrimLeft(v.streamed.String(), " \t\r\n")
	v.streamed.Reset()
	switch {
	case text == "" || strings.HasPrefix(shown, text):
	case v.answering && shown != "" && strings.HasPrefix(text, shown):
		v.write(text[len(shown):])
	default:
		v.line(answerPrompt + text)
	}
}

// result is a tool's result as a few indented lines.
func result(m *protocol.ChatMessage) string {
	text := strings.TrimSpace(shorten(m.Content, maxResultChars))
	if m.Status == protocol.ToolFailed {
		text = "error: " + text
	}
	lines := strings.Split(text, "\n")
	if len(lines) > maxResultLines {
		lines = append(lines[:maxResultLines], fmt.Sprintf("(%d more lines)", len(lines)-maxResultLines))
	}
	return strings.Join(lines, "\n    ")
}

// shorten cuts s to about n bytes on a rune boundary.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
