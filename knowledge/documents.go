package knowledge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"koe"
	"koe/internal/quote"
)

// Documents is the knowledge API (the routes under
// /api/characters/:conf_uid/documents): a character's documents as its
// user adds, lists and removes them, each request checked as a client's.
// Its errors are *koe.Errors worded for the client, *FileErrors, or koe's
// own.
type Documents struct {
	svc  *Service
	opts DocumentsOptions
}

// DocumentsOptions describe the characters whose documents the API
// serves.
type DocumentsOptions struct {
	// Count is the token counter of a character's model; ok is false when
	// no character has that conf_uid.
	Count func(confUID string) (count func(string) int, ok bool)
	// Notify, if set, tells the character's sessions how the indexing of
	// an added document goes.
	Notify func(confUID string, n Notice)
}

// StageFailed is the stage of a Notice of a document that was not taken:
// Reason says why.
const StageFailed = "failed"

// Notice is a step of an added document's indexing: a Progress (or
// StageFailed), the task it belongs to (one per added document), and
// what the client is told of a failure.
type Notice struct {
	Task string
	Progress
	Reason string
}

// NewDocuments serves the documents of svc's characters.
func NewDocuments(svc *Service, opts DocumentsOptions) *Documents {
	if opts.Notify == nil {
		opts.Notify = func(string, Notice) {}
	}
	return &Documents{svc: svc, opts: opts}
}

// counter checks the character a request names and returns its token
// counter.
func (d *Documents) counter(conf string) (func(string) int, error) {
	if !koe.ValidID(conf) {
		return nil, fmt.Errorf("documents of %q: %w", quote.Shorten(conf, 80), koe.ErrInvalidID)
	}
	count, ok := d.opts.Count(conf)
	if !ok {
		return nil, koe.Errorf(koe.NotFound, "no character has conf_uid %q", conf)
	}
	return count, nil
}

// Add reads a file into a character's knowledge base (replacing the one of
// the same name), telling the character's sessions how it goes. A refusal
// is a *FileError.
func (d *Documents) Add(ctx context.Context, conf string, u Upload) (Document, error) {
	count, err := d.counter(conf)
	if err != nil {
		return Document{}, err
	}
	task := "ingest:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// -10, not -1: -1/10 is 0 in Go, which dropped "reading" (0%).
	last := -10
	progress := func(p Progress) {
		// Tens of percent are enough to watch; every batch would flood.
		if p.Percent/10 == last/10 && p.Stage != "done" {
			return
		}
		last = p.Percent
		d.opts.Notify(conf, Notice{Task: task, Progress: p})
	}
	doc, err := d.svc.Add(ctx, conf, u, count, progress)
	if err != nil {
		reason := "koe could not store it; the reason is in its log"
		var refused *FileError
		if errors.As(err, &refused) {
			reason = refused.Reason
		}
		d.opts.Notify(conf, Notice{Task: task, Progress: Progress{File: u.Name, Stage: StageFailed}, Reason: reason})
		return Document{}, err
	}
	return doc, nil
}

// List lists a character's knowledge base.
func (d *Documents) List(ctx context.Context, conf string) ([]Document, error) {
	if _, err := d.counter(conf); err != nil {
		return nil, err
	}
	docs, err := d.svc.List(ctx, conf)
	if err != nil {
		return nil, fmt.Errorf("list documents: %w", err)
	}
	if docs == nil {
		docs = []Document{}
	}
	return docs, nil
}

// Delete removes a document and its chunks from a character's knowledge
// base.
func (d *Documents) Delete(ctx context.Context, conf, id string) error {
	if _, err := d.counter(conf); err != nil {
		return err
	}
	if !koe.ValidID(id) {
		return fmt.Errorf("document %q: %w", quote.Shorten(id, 80), koe.ErrInvalidID)
	}
	found, err := d.svc.Delete(ctx, conf, id)
	if err != nil {
		if IsFileError(err) {
			return &koe.Error{Kind: koe.Conflict, Err: err}
		}
		return fmt.Errorf("delete document: %w", err)
	}
	if !found {
		return koe.Errorf(koe.NotFound, "character %q has no document %q", conf, id)
	}
	return nil
}
