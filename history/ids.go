package history

import (
	"fmt"

	"koe"
	"koe/internal/quote"
)

// maxQuotedIDLen bounds how much of a rejected id is echoed back in errors;
// rejected ids are attacker-controlled and end up in logs.
const maxQuotedIDLen = 64

// checkIDs validates ids in order and reports the first bad one. kind names
// which id it was so callers can tell a bad conf uid from a bad history uid.
func checkIDs(ids ...idArg) error {
	for _, a := range ids {
		if !koe.ValidID(a.id) {
			return fmt.Errorf("%s %q: %w", a.kind, truncateID(a.id), koe.ErrInvalidID)
		}
	}
	return nil
}

type idArg struct {
	kind string
	id   string
}

func confID(id string) idArg     { return idArg{kind: "conf uid", id: id} }
func historyID(id string) idArg  { return idArg{kind: "history uid", id: id} }
func promptName(id string) idArg { return idArg{kind: "prompt name", id: id} }

func truncateID(id string) string { return quote.Shorten(id, maxQuotedIDLen) }
