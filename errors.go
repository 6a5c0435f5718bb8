package koe

import (
	"errors"
	"fmt"
)

// Sentinel errors; callers match them with errors.Is, as every returned
// error is wrapped with the ids and operation involved.
var (
	// ErrNotFound means what was asked for does not exist: a history (or
	// its conf), an image of one, a document's text.
	ErrNotFound = errors.New("history not found")
	// ErrInvalidID means a client-supplied id failed ValidID; nothing was read
	// or written.
	ErrInvalidID = errors.New("invalid id")
	// ErrInvalidRecord means a record, summary, prompt or document failed
	// validation; nothing was written.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrInvalidPage means a read of records asked for none.
	ErrInvalidPage = errors.New("invalid page request")
	// ErrMarkMoved means a recall mark was not where the indexer that
	// saves read it: another indexer (of another instance, say) saved
	// first. Nothing was written.
	ErrMarkMoved = errors.New("the recall mark moved: another indexer saved first")
	// ErrRestarting means koe is draining before it stops (the first
	// SIGTERM): it finishes the turns running and starts no new one. The
	// client sends its input again on a new connection, to another
	// instance or to this one restarted; nothing of it was stored.
	ErrRestarting = &Error{Kind: Unavailable, Err: errors.New("koe is restarting and starts no new turn here: connect again and send it again")}
)

// Kind says what sort of failure an error is, so that whoever tells the
// client (an error frame, an HTTP status) need not know which part of koe
// failed.
type Kind int

// Kinds of failure a client can be told about.
const (
	// Internal is koe's own failure (a database write, a bug): the
	// details go to the log, the client gets a short message. It is the
	// kind of every error that does not say otherwise.
	Internal Kind = iota
	// Invalid means the request itself is wrong; the message says how.
	Invalid
	// NotFound means the request names something that does not exist.
	NotFound
	// Unavailable means a service koe depends on (the LLM, speech, the
	// coordination service) failed; the message names it and what to set.
	Unavailable
	// Conflict means the request cannot be done now (a reply is being
	// made, the same file is being read); it may be tried again.
	Conflict
)

var kindNames = [...]string{
	Internal:    "internal error",
	Invalid:     "invalid request",
	NotFound:    "not found",
	Unavailable: "service unavailable",
	Conflict:    "conflict",
}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind %d", int(k))
	}
	return kindNames[k]
}

// Error is a failure that knows its kind. Its text is Op's, then Err's;
// an Error of a kind other than Internal may be shown to the client who
// asked, so Op and Err are worded for them.
type Error struct {
	// Op is what was being done ("attach a file"); empty when Err says it
	// all.
	Op   string
	Kind Kind
	// Err is the cause, kept for errors.Is and errors.As.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Err == nil && e.Op == "":
		return e.Kind.String()
	case e.Err == nil:
		return e.Op + ": " + e.Kind.String()
	case e.Op == "":
		return e.Err.Error()
	}
	return e.Op + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of kind whose cause is fmt.Errorf(format,
// args...), %w included: its text is the formatted message.
func Errorf(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Err: fmt.Errorf(format, args...)}
}

// ErrorKind returns the kind of err: that of the first *Error in its
// chain; else NotFound for ErrNotFound and Invalid for ErrInvalidID and
// ErrInvalidRecord, which reach clients through the requests that name
// ids and send records; else Internal.
func ErrorKind(err error) Kind {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Kind
	case errors.Is(err, ErrNotFound):
		return NotFound
	case errors.Is(err, ErrInvalidID), errors.Is(err, ErrInvalidRecord):
		return Invalid
	}
	return Internal
}
