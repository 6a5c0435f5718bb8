package conversation

import (
	"errors"
	"fmt"

	"koe"
	"koe/agent"
	"koe/asr"
	"koe/knowledge"
)

// Kind classifies a failure for whoever asked: the WebSocket layer words it
// as an error frame, the REST layer as an HTTP status.
type Kind int

// Kinds of failure a client can be told about.
const (
	// KindInternal is koe's own failure (a database write, a bug): the
	// details go to the log, the client gets a short message.
	KindInternal Kind = iota
	// KindInvalid means the request itself is wrong; the message says how.
	KindInvalid
	// KindNotFound means the request names something that does not exist.
	KindNotFound
	// KindUnavailable means a service koe depends on (the LLM, speech)
	// failed; the message names it and what to set.
	KindUnavailable
	// KindConflict means the request cannot be done now (a reply is
	// being made, the same file is being read); it may be tried again.
	KindConflict
)

// Problem is a failure as a client sees it.
type Problem struct {
	Kind    Kind
	Message string
}

// clientError is an error whose message is written for the client. Every
// error this package returns for a client's mistake is one; anything else
// reaching Explain is internal.
type clientError struct {
	kind Kind
	msg  string
	err  error // wrapped for errors.Is/As; its text is not shown
}

func (e *clientError) Error() string { return e.msg }
func (e *clientError) Unwrap() error { return e.err }

// invalid reports a client mistake; format is worded for the client.
func invalid(format string, args ...any) error {
	return &clientError{kind: KindInvalid, msg: fmt.Sprintf(format, args...)}
}

// refused wraps err, whose own message is worded for the client (the asr,
// image and character errors are), as a client mistake.
func refused(err error) error {
	return &clientError{kind: KindInvalid, msg: err.Error(), err: err}
}

// Explain turns any error a session or the hub returned into what the
// client is told. Errors it does not know are internal: it says so without
// their text (which may hold file paths or decoder internals), and the
// caller logs the error itself (see Log).
func Explain(err error) Problem {
	var ce *clientError
	var llm *agent.LLMError
	var tools *agent.ToolsTooLargeError
	switch {
	case errors.As(err, &ce):
		return Problem{Kind: ce.kind, Message: ce.msg}
	case errors.As(err, &llm):
		// Worded for people: it names the URL and the setting to change.
		return Problem{Kind: KindUnavailable, Message: llm.Error()}
	case errors.Is(err, koe.ErrInvalidID):
		return Problem{Kind: KindInvalid, Message: "that id is not valid: ids are 1-128 letters, digits, '_', '-' or '.'"}
	case errors.Is(err, koe.ErrNotFound):
		return Problem{Kind: KindNotFound, Message: "no such history"}
	case errors.Is(err, koe.ErrInvalidRecord):
		return Problem{Kind: KindInvalid, Message: "that text cannot be stored: it is too long or not valid UTF-8"}
	case errors.As(err, &tools):
		// Nothing the user sends fits: the configuration must change,
		// and the message says how.
		return Problem{Kind: KindUnavailable, Message: tools.Error()}
	case errors.Is(err, agent.ErrContextTooLarge):
		return Problem{Kind: KindInvalid, Message: "the message does not fit the model's context window (llm.context_window): send something shorter"}
	case errors.Is(err, asr.ErrBadAudio), errors.Is(err, ErrBadImage):
		return Problem{Kind: KindInvalid, Message: err.Error()}
	case knowledge.IsFileError(err):
		// Worded for people: the file's name and what is wrong with it.
		return Problem{Kind: KindInvalid, Message: err.Error()}
	}
	return Problem{Kind: KindInternal, Message: "koe failed to do that; the reason is in its log"}
}

// IsInternal reports whether err is koe's own failure, which the caller
// should log with its details (Explain does not show them).
func IsInternal(err error) bool { return Explain(err).Kind == KindInternal }
