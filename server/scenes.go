package server

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"koe/protocol"
)

// Scenes are the all-character scenes a streamer runs: two or more
// characters talking with each other on a topic, shown on the overlay.
// Errors carry their kind (koe.Invalid for a request that can never work,
// koe.NotFound for an unknown scene or character, koe.Conflict for a
// limit that frees up).
type Scenes interface {
	// Start checks the request and starts the scene; ctx is the
	// request's (the scene outlives it).
	Start(ctx context.Context, req protocol.SceneRequest) (protocol.SceneInfo, error)
	List() protocol.SceneList
	Scene(id string) (protocol.SceneInfo, error)
	// Stop ends the scene: the line being said stops, kept as heard.
	Stop(id string) (protocol.SceneInfo, error)
	// Pause holds the scene once the line being said has ended; Resume
	// goes on.
	Pause(id string) (protocol.SceneInfo, error)
	Resume(id string) (protocol.SceneInfo, error)
	// Skip stops the line being said (kept as heard) and reports whether
	// one was; the scene goes on with the next speaker.
	Skip(id string) (bool, protocol.SceneInfo, error)
}

// sceneRoutes: POST /api/scenes (start one), GET /api/scenes (the list),
// GET /api/scenes/:id, POST /api/scenes/:id/stop, /pause, /resume and
// /skip. Access (host, origin, token) and the body's bound are checked by
// guard, for every /api route, before the body is read.
func (s *Server) sceneRoutes(api fiber.Router) {
	scenes := func(h func(*fiber.Ctx, Scenes) error) fiber.Handler {
		return func(c *fiber.Ctx) error {
			if s.opts.Scenes == nil {
				return fiber.NewError(fiber.StatusNotFound, "scenes are not served by this koe")
			}
			return h(c, s.opts.Scenes)
		}
	}
	api.Post("/scenes", scenes(func(c *fiber.Ctx, sc Scenes) error {
		var req protocol.SceneRequest
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
		info, err := sc.Start(c.UserContext(), req)
		if err != nil {
			return err
		}
		return c.Status(fiber.StatusCreated).JSON(info)
	}))
	api.Get("/scenes", scenes(func(c *fiber.Ctx, sc Scenes) error {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.JSON(sc.List())
	}))
	api.Get("/scenes/:id", scenes(func(c *fiber.Ctx, sc Scenes) error {
		info, err := sc.Scene(c.Params("id"))
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.JSON(info)
	}))
	for _, cmd := range []struct {
		name string
		do   func(Scenes, string) (protocol.SceneInfo, error)
	}{
		{"stop", Scenes.Stop},
		{"pause", Scenes.Pause},
		{"resume", Scenes.Resume},
	} {
		api.Post("/scenes/:id/"+cmd.name, scenes(func(c *fiber.Ctx, sc Scenes) error {
			info, err := cmd.do(sc, c.Params("id"))
			if err != nil {
				return err
			}
			return c.JSON(info)
		}))
	}
	api.Post("/scenes/:id/skip", scenes(func(c *fiber.Ctx, sc Scenes) error {
		skipped, info, err := sc.Skip(c.Params("id"))
		if err != nil {
			return err
		}
		return c.JSON(fiber.Map{"skipped": skipped, "scene": info})
	}))
}
