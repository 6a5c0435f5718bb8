package koe

import "errors"

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
)
