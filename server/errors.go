package server

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"koe"
	"koe/internal/quote"
)

// Problem is a failure as its client is told of it: its kind (over REST,
// the HTTP status) and its words.
type Problem struct {
	Kind    koe.Kind
	Message string
}

// internalMessage is all a client hears of koe's own failures; their
// details go to the log.
const internalMessage = "koe failed to do that; the reason is in its log"

// explain is what a client is told of a failure, the same over HTTP and
// the WebSocket: Options.Explain's words, or else the failure's kind and
// text, koe's own failures untold.
func (s *Server) explain(err error) Problem {
	if s.opts.Explain != nil {
		return s.opts.Explain(err)
	}
	if kind := koe.ErrorKind(err); kind != koe.Internal {
		return Problem{Kind: kind, Message: err.Error()}
	}
	return Problem{Kind: koe.Internal, Message: internalMessage}
}

// isInternal reports whether err is koe's own failure, to be logged.
func (s *Server) isInternal(err error) bool { return s.explain(err).Kind == koe.Internal }

// problemStatus is the HTTP status of each kind of failure.
var problemStatus = map[koe.Kind]int{
	koe.Internal:    http.StatusInternalServerError,
	koe.Invalid:     http.StatusBadRequest,
	koe.NotFound:    http.StatusNotFound,
	koe.Unavailable: http.StatusBadGateway,
	koe.Conflict:    http.StatusConflict,
}

// httpError answers every failed request: fiber's own errors (routing,
// body checks) as they are, everything else through the one mapping the
// WebSocket side uses too, with internal details logged, not sent.
func (s *Server) httpError(c *fiber.Ctx, err error) error {
	if errors.Is(err, errDraining) {
		return refuseDraining(c)
	}
	if tl := (*uploadTooLarge)(nil); errors.As(err, &tl) {
		return s.refuseUpload(c, tl.refused)
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return c.Status(fe.Code).JSON(fiber.Map{"error": fe.Message})
	}
	p := s.explain(err)
	if p.Kind == koe.Internal {
		s.log.Error("http request failed", "method", c.Method(), "path", quote.Shorten(c.Path(), 200), "err", err)
	}
	return c.Status(problemStatus[p.Kind]).JSON(fiber.Map{"error": p.Message})
}
