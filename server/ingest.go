package server

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"koe/internal/quote"
)

// clientContext is a context for the work of request c: it ends when koe
// shuts down or when the client leaves, so that work nobody waits for (a
// file being read) stops. Call it once the body has been read whole, so
// that the watch sees the client close its side, not its body arriving.
func (s *Server) clientContext(c *fiber.Ctx) (context.Context, func()) {
	ctx, cancel := context.WithCancel(s.base)
	gone, stopWatch := watchPeer(c.Context().Conn())
	go func() {
		select {
		case <-gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		stopWatch()
	}
}

// ingestStopped answers an upload whose reading was stopped before it was
// done: nothing of that file is kept. At shutdown the client hears so
// (503); a client that left hears nothing, and the answer is only for the
// access log.
func (s *Server) ingestStopped(c *fiber.Ctx, body fiber.Map, name string) error {
	if s.base.Err() == nil {
		s.log.Info("upload stopped: the client left before its file was read", "file", quote.Shorten(name, 200))
		return c.Status(fiber.StatusBadRequest).JSON(fiber.Map{"error": "the client left before the file was read"})
	}
	c.Set(fiber.HeaderRetryAfter, retryAfterSeconds)
	body["error"] = fmt.Sprintf("koe is shutting down: %s was not stored; send it again once koe is back", name)
	return c.Status(fiber.StatusServiceUnavailable).JSON(body)
}

// retryAfterSeconds is the Retry-After of refusals that pass: koe reading
// as many files as it may, koe restarting.
const retryAfterSeconds = "5"
