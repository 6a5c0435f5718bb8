package server

import (
	"context"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"koe/recall"
)

// The memories API: a character's long-term memory, for the user to see
// and to prune.
//
//	GET    /api/characters/:conf_uid/memories?q=TEXT&budget=N   what a turn asking TEXT would recall
//	GET    /api/characters/:conf_uid/memories?before=C&limit=N  the newest memories, and the index's size
//	DELETE /api/characters/:conf_uid/memories/:history_uid/:seq one memory, for good
//	DELETE /api/characters/:conf_uid/memories?history_uid=UID   every memory of one history
//	DELETE /api/characters/:conf_uid/memories?all=true          every memory of the character
func (s *Server) memoryRoutes(api fiber.Router) {
	api.Get("/characters/:conf_uid/memories", s.withRecall(func(c *fiber.Ctx) error {
		conf := param(c, "conf_uid")
		if c.Context().QueryArgs().Has("q") {
			budget, err := budgetQuery(c)
			if err != nil {
				return err
			}
			r, err := s.opts.Memories.Recall(s.base, conf, query(c, "q"), budget)
			if err != nil {
				return err
			}
			return c.JSON(r)
		}
		limit, err := strconv.Atoi(c.Query("limit", "0"))
		if err != nil {
			return fiber.NewError(fiber.StatusBadRequest, "limit must be a whole number")
		}
		list, err := s.opts.Memories.List(s.base, conf, query(c, "before"), limit)
		if err != nil {
			return err
		}
		return c.JSON(list)
	}))
	api.Delete("/characters/:conf_uid/memories/:history_uid/:seq", s.withRecall(func(c *fiber.Ctx) error {
		seq, err := strconv.ParseUint(c.Params("seq"), 10, 64)
		if err != nil {
			return fiber.NewError(fiber.StatusBadRequest, "seq must be a message id (a whole number)")
		}
		if err := s.opts.Memories.Forget(s.base, param(c, "conf_uid"), param(c, "history_uid"), seq); err != nil {
			return err
		}
		return c.JSON(fiber.Map{"forgotten": true})
	}))
	api.Delete("/characters/:conf_uid/memories", s.withRecall(func(c *fiber.Ctx) error {
		conf := param(c, "conf_uid")
		args := c.Context().QueryArgs()
		uid, all := query(c, "history_uid"), c.Query("all")
		switch {
		case args.Has("history_uid") && args.Has("all"):
			return fiber.NewError(fiber.StatusBadRequest, "give history_uid or all=true, not both")
		case args.Has("all") && all != "true":
			return fiber.NewError(fiber.StatusBadRequest, "all must be true to forget everything the character remembers")
		case args.Has("history_uid"):
			n, err := s.opts.Memories.ForgetConversation(s.base, conf, uid)
			if err != nil {
				return err
			}
			return c.JSON(fiber.Map{"forgotten": true, "history_uid": uid, "count": n})
		case all == "true":
			n, err := s.opts.Memories.ForgetEverything(s.base, conf)
			if err != nil {
				return err
			}
			return c.JSON(fiber.Map{"forgotten": true, "count": n})
		}
		// A bare DELETE is more likely a mistake than a wish to forget
		// everything the character knows.
		return fiber.NewError(fiber.StatusBadRequest, "say what to forget: ?history_uid=UID for one conversation, ?all=true for everything, or DELETE .../memories/HISTORY_UID/SEQ for one memory")
	}))
}

// Memories are the characters' long-term memories (recall), for the user
// to see and to prune.
type Memories interface {
	// Recall is what a turn of the character asking text would recall,
	// within budget tokens (nil: the character's own).
	Recall(ctx context.Context, confUID, text string, budget *int) (recall.Recollection, error)
	// List lists up to limit (0: the default) memories said before the
	// cursor before ("": the newest), newest first.
	List(ctx context.Context, confUID, before string, limit int) (recall.Listing, error)
	// Forget forgets one memory for good.
	Forget(ctx context.Context, confUID, historyUID string, seq uint64) error
	// ForgetConversation forgets every memory of one history and says
	// how many went.
	ForgetConversation(ctx context.Context, confUID, historyUID string) (int, error)
	// ForgetEverything forgets every memory of the character.
	ForgetEverything(ctx context.Context, confUID string) (int, error)
}

// withRecall answers 503 when koe keeps no long-term memory.
func (s *Server) withRecall(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if s.opts.Memories == nil {
			return fiber.NewError(fiber.StatusServiceUnavailable, "koe runs without long-term memory: there are no memories to show or forget")
		}
		return h(c)
	}
}

// budgetQuery reads ?budget=N (nil when absent: the character's own).
func budgetQuery(c *fiber.Ctx) (*int, error) {
	if !c.Context().QueryArgs().Has("budget") {
		return nil, nil
	}
	n, err := strconv.Atoi(c.Query("budget"))
	if err != nil {
		return nil, fiber.NewError(fiber.StatusBadRequest, "budget must be a whole number of tokens")
	}
	return &n, nil
}

// param and query copy a request's value: fiber's point into a buffer the
// next request reuses, and recall keeps conf uids and texts.
func param(c *fiber.Ctx, name string) string { return strings.Clone(c.Params(name)) }
func query(c *fiber.Ctx, name string) string { return strings.Clone(c.Query(name)) }
