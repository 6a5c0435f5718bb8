package server

import (
	"github.com/gofiber/fiber/v2"

	"koe/livechat"
)

// LiveChat is the audience's chat feeding a character's live session
// (livechat.Runner): the streamer reads its state and steers it over REST.
type LiveChat interface {
	Status() livechat.Status
	Pause()
	Resume()
	Skip() bool
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
	api.Get("/live", live(func(c *fiber.Ctx, lc LiveChat) error {
		return c.JSON(lc.Status())
	}))
	api.Post("/live/pause", live(func(c *fiber.Ctx, lc LiveChat) error {
		lc.Pause()
		return c.JSON(lc.Status())
	}))
	api.Post("/live/resume", live(func(c *fiber.Ctx, lc LiveChat) error {
		lc.Resume()
		return c.JSON(lc.Status())
	}))
	api.Post("/live/skip", live(func(c *fiber.Ctx, lc LiveChat) error {
		skipped := lc.Skip()
		return c.JSON(fiber.Map{"skipped": skipped, "status": lc.Status()})
	}))
}
