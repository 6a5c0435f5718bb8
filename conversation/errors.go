package conversation

import (
	"errors"

	"koe"
	"koe/agent"
	"koe/asr"
	"koe/knowledge"
)

// Problem is a failure as a client sees it: the WebSocket layer words
// its kind as an error frame, the REST layer as an HTTP status.
type Problem struct {
	Kind    koe.Kind
	Message string
}

// Every error this package returns for a client's mistake is a *koe.Error
// whose text is worded for the client; anything else reaching Explain is
// internal.

// invalid reports a client mistake; format is worded for the client.
func invalid(format string, args ...any) error {
	return koe.Errorf(koe.Invalid, format, args...)
}

// refused wraps err, whose own message is worded for the client (the asr,
// image and character errors are), as a client mistake.
func refused(err error) error {
	return &koe.Error{Kind: koe.Invalid, Err: err}
}

// hiddenCause is a message worded for the client over a cause it does not
// show: the cause is logged where it happened, and kept for errors.Is and
// errors.As.
type hiddenCause struct {
	msg   string
	cause error
}

func (e *hiddenCause) Error() string { return e.msg }
func (e *hiddenCause) Unwrap() error { return e.cause }

// Explain turns any error a session or the hub returned into what the
// client is told. Errors it does not know are internal: it says so without
// their text (which may hold file paths or decoder internals), and the
// caller logs the error itself (see Log).
func Explain(err error) Problem {
	var ke *koe.Error
	var llm *agent.LLMError
	var tools *agent.ToolsTooLargeError
	switch {
	case errors.As(err, &ke) && ke.Kind != koe.Internal:
		return Problem{Kind: ke.Kind, Message: ke.Error()}
	case errors.As(err, &llm):
		// Worded for people: it names the URL and the setting to change.
		return Problem{Kind: koe.Unavailable, Message: llm.Error()}
	case errors.Is(err, koe.ErrInvalidID):
		return Problem{Kind: koe.Invalid, Message: "that id is not valid: ids are 1-128 letters, digits, '_', '-' or '.'"}
	case errors.Is(err, koe.ErrNotFound):
		return Problem{Kind: koe.NotFound, Message: "no such history"}
	case errors.Is(err, koe.ErrInvalidRecord):
		return Problem{Kind: koe.Invalid, Message: "that text cannot be stored: it is too long or not valid UTF-8"}
	case errors.As(err, &tools):
		// Nothing the user sends fits: the configuration must change,
		// and the message says how.
		return Problem{Kind: koe.Unavailable, Message: tools.Error()}
	case errors.Is(err, agent.ErrContextTooLarge):
		return Problem{Kind: koe.Invalid, Message: "the message does not fit the model's context window (llm.context_window): send something shorter"}
	case errors.Is(err, asr.ErrBadAudio), errors.Is(err, errBadImage):
		return Problem{Kind: koe.Invalid, Message: err.Error()}
	case knowledge.IsFileError(err):
		// Worded for people: the file's name and what is wrong with it.
		return Problem{Kind: koe.Invalid, Message: err.Error()}
	}
	return Problem{Kind: koe.Internal, Message: "koe failed to do that; the reason is in its log"}
}

// isInternal reports whether err is koe's own failure, which the caller
// should log with its details (Explain does not show them).
func isInternal(err error) bool { return Explain(err).Kind == koe.Internal }
