package history

import (
	"context"
	"fmt"

	"koe"
	"koe/internal/quote"
)

// Every store method opens with one of these checks, the same in every
// backend: a call whose context has ended, or that names an id a client
// could have forged (a path, a NUL, a megabyte), is refused before the
// database is touched.

// maxQuotedIDLen bounds how much of a rejected id is echoed back in errors;
// rejected ids are attacker-controlled and end up in logs.
const maxQuotedIDLen = 64

// CheckConf checks a call about a character (conf uid).
func CheckConf(ctx context.Context, conf string) error {
	return check(ctx, idArg{"conf uid", conf})
}

// CheckHistory checks a call about one history of a character.
func CheckHistory(ctx context.Context, conf, uid string) error {
	return check(ctx, idArg{"conf uid", conf}, idArg{"history uid", uid})
}

// CheckConfOrHistory checks a call about one history of a character, or
// about all of them when uid is "".
func CheckConfOrHistory(ctx context.Context, conf, uid string) error {
	if uid == "" {
		return CheckConf(ctx, conf)
	}
	return CheckHistory(ctx, conf, uid)
}

// CheckPromptName checks a call about one prompt of a character.
func CheckPromptName(ctx context.Context, conf, name string) error {
	return check(ctx, idArg{"conf uid", conf}, idArg{"prompt name", name})
}

// CheckDoc checks a call about one knowledge document of a character.
func CheckDoc(ctx context.Context, conf, doc string) error {
	return check(ctx, idArg{"conf uid", conf}, idArg{"document id", doc})
}

// CheckSummary checks a summary before any write, so that a bad one
// stores nothing: that it is about history uid, then that it is well
// formed.
func CheckSummary(uid string, r koe.SummaryRecord) error {
	if r.ThreadID != uid {
		return fmt.Errorf("summary: thread id %q does not match the history: %w", QuoteID(r.ThreadID), koe.ErrInvalidRecord)
	}
	return r.Validate()
}

// QuoteID shortens an id a client sent for an error message.
func QuoteID(id string) string { return quote.Shorten(id, maxQuotedIDLen) }

type idArg struct {
	kind string
	id   string
}

// check reports an ended ctx, then the first bad id, naming which id it
// was so callers can tell a bad conf uid from a bad history uid.
func check(ctx context.Context, ids ...idArg) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, a := range ids {
		if !koe.ValidID(a.id) {
			return fmt.Errorf("%s %q: %w", a.kind, QuoteID(a.id), koe.ErrInvalidID)
		}
	}
	return nil
}
