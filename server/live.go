package server

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"koe/livechat"
)

// LiveChat is the audience's chat feeding a character's live session: the
// streamer reads its state and steers it over REST. Each command answers
// the state after it. With several instances, the one asked may forward
// the command to the one that runs the chat; an error means it could not
// (the answer is then 503 with the error's words).
type LiveChat interface {
	Status(ctx context.Context) (livechat.Status, error)
	Pause(ctx context.Context) (livechat.Status, error)
	Resume(ctx context.Context) (livechat.Status, error)
	// Skip stops the running turn and reports whether one was running.
	Skip(ctx context.Context) (bool, livechat.Status, error)
}

// liveRoutes: GET /api/live (the state), POST /api/live/pause, /resume and
// /skip (the streamer's commands). Each answers the state after the
// command; skip also says whether a turn was running.
func (s *Server) liveRoutes(api fiber.Router) {
	live := func(h func(*fiber.Ctx, LiveChat) error) fiber.Handler {
		return func(c *fiber.Ctx) error {
			if s.opts.LiveChat == nil {
				return fiber.NewError(fiber.StatusNotFound, "live chat is off (set live_chat.enabled in the configuration)")
			}
			return h(c, s.opts.LiveChat)
		}
	}
	answer := func(c *fiber.Ctx, v any, err error) error {
		if err != nil {
			return fiber.NewError(fiber.StatusServiceUnavailable, err.Error())
		}
		return c.JSON(v)
	}
	api.Get("/live", live(func(c *fiber.Ctx, lc LiveChat) error {
		st, err := lc.Status(c.UserContext())
		return answer(c, st, err)
	}))
	api.Post("/live/pause", live(func(c *fiber.Ctx, lc LiveChat) error {
		st, err := lc.Pause(c.UserContext())
		return answer(c, st, err)
	}))
	api.Post("/live/resume", live(func(c *fiber.Ctx, lc LiveChat) error {
		st, err := lc.Resume(c.UserContext())
		return answer(c, st, err)
	}))
	api.Post("/live/skip", live(func(c *fiber.Ctx, lc LiveChat) error {
		skipped, st, err := lc.Skip(c.UserContext())
		return answer(c, fiber.Map{"skipped": skipped, "status": st}, err)
	}))
}
