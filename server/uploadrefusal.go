package server

import (
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"koe/internal/quote"
	"koe/knowledge"
)

// An upload too large for its route is refused before its body is read
// (its Content-Length is over the limit) or as soon as the body passes
// the limit while read. Either way the answer has the shape of every
// other refused upload, {conf_uid, added, refused: [{filename, reason,
// kind}], error} (or {history_uid, refused, error} for an attached file),
// and names what koe knows by then: the size, and the names of the files
// whose part headers it has read. A refusal from the Content-Length alone
// knows no name: the body, which holds it, is never read.

// uploadTooLarge is an upload body that passed its limit while read.
type uploadTooLarge struct {
	refused []*knowledge.FileError
}

func (e *uploadTooLarge) Error() string { return e.refused[0].Error() }

// isBodyTooLarge reports whether err is a body read cut at its limit,
// by koe's reader or by fasthttp's.
func isBodyTooLarge(err error) bool {
	return errors.Is(err, errBodyTooLarge) || errors.Is(err, fasthttp.ErrBodyTooLarge)
}

// declaredTooLarge is the refusal of an upload whose Content-Length (size
// bytes) is over what the route reads.
func (s *Server) declaredTooLarge(size int64) []*knowledge.FileError {
	return []*knowledge.FileError{{Kind: knowledge.ErrKindTooLarge,
		Reason: fmt.Sprintf("the upload is %s; knowledge.max_file_bytes allows %s of files in one upload (send large files one per request)",
			quote.Bytes(size), quote.Bytes(int64(s.maxUpload)))}}
}

// cutTooLarge is the refusal of an upload whose body passed the limit
// while its part named name (empty: between files, or a part without a
// name) was read, read bytes into it; taken are the names of the files
// read whole before it, refused with it, since a request is taken whole
// or not at all.
func (s *Server) cutTooLarge(name string, read int, taken []string) *uploadTooLarge {
	limit := quote.Bytes(int64(s.maxUpload))
	var reason string
	switch {
	case name != "" && len(taken) == 0:
		reason = fmt.Sprintf("the file is more than %s; knowledge.max_file_bytes allows %s", quote.Bytes(int64(read)), limit)
	case name != "":
		reason = fmt.Sprintf("with this file the upload is more than knowledge.max_file_bytes allows (%s of files in one upload); send large files one per request", limit)
	default:
		reason = fmt.Sprintf("the upload is more than knowledge.max_file_bytes allows (%s of files in one upload); send large files one per request", limit)
	}
	refused := []*knowledge.FileError{{Filename: name, Kind: knowledge.ErrKindTooLarge, Reason: reason}}
	for _, t := range taken {
		refused = append(refused, &knowledge.FileError{Filename: t, Kind: knowledge.ErrKindTooLarge,
			Reason: fmt.Sprintf("not taken: the upload is more than knowledge.max_file_bytes allows (%s of files in one upload); send large files one per request", limit)})
	}
	return &uploadTooLarge{refused: refused}
}

// refuseUpload answers an upload refused for its size, in the shape of
// the upload's route; the body has not been read whole, so the
// connection closes after the answer.
func (s *Server) refuseUpload(c *fiber.Ctx, refused []*knowledge.FileError) error {
	s.closeUnread(c)
	r, _ := uploadRouteOf(c.Method(), c.Path())
	body := fiber.Map{"refused": refused}
	if r.history != "" {
		body["history_uid"] = r.history
	} else {
		body["conf_uid"] = r.conf
		body["added"] = []knowledge.Document{}
	}
	return refusal(c, body, refused)
}
