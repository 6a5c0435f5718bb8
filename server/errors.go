package server

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"koe/conversation"
	"koe/internal/quote"
)

// explain is what a client is told of a failure, the same over HTTP and
// the WebSocket.
func explain(err error) conversation.Problem { return conversation.Explain(err) }

// isInternal reports whether err is koe's own failure, to be logged.
func isInternal(err error) bool { return explain(err).Kind == conversation.KindInternal }

// problemStatus is the HTTP status of each kind of failure.
var problemStatus = map[conversation.Kind]int{
	conversation.KindInternal:    http.StatusInternalServerError,
	conversation.KindInvalid:     http.StatusBadRequest,
	conversation.KindNotFound:    http.StatusNotFound,
	conversation.KindUnavailable: http.StatusBadGateway,
	conversation.KindConflict:    http.StatusConflict,
}

// httpError answers every failed request: fiber's own errors (routing,
// body checks) as they are, everything else through the one mapping the
// WebSocket side uses too, with internal details logged, not sent.
func (s *Server) httpError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return c.Status(fe.Code).JSON(fiber.Map{"error": fe.Message})
	}
	p := explain(err)
	if p.Kind == conversation.KindInternal {
		s.log.Error("http request failed", "method", c.Method(), "path", quote.Shorten(c.Path(), 200), "err", err)
	}
	return c.Status(problemStatus[p.Kind]).JSON(fiber.Map{"error": p.Message})
}
