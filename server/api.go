package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"koe"
	"koe/conversation"
	"koe/internal/quote"
)

// The REST API mirrors koe's memory and history messages for tools and
// scripts:
//
//	GET  /api/sessions                                   open sessions
//	GET  /api/sessions/:client_uid/memory                memory-state
//	PUT  /api/sessions/:client_uid/compression-rate      {"rate": 0.2}
//	GET  /api/sessions/:client_uid/context               the latest LLM call's exact context
//	GET  /api/characters/:conf_uid/prompts/:name         name = system | reminder
//	PUT  /api/characters/:conf_uid/prompts/:name         {"text": "..."} ("" = default)
//	GET  /api/histories/:conf_uid/:history_uid/messages  ?before=ID&limit=N
//	GET  /api/histories/:conf_uid/:history_uid/images/:ref
//	GET  /api/characters/:conf_uid/overlay               the overlay's pictures (overlay.go)
//
// the memories API (memories.go), the knowledge API (knowledge.go) and the
// chat API (chat.go).
func (s *Server) apiRoutes() {
	hub := s.opts.Hub
	api := s.app.Group("/api")
	api.Get("/sessions", func(c *fiber.Ctx) error {
		return c.JSON(hub.Sessions())
	})
	api.Get("/sessions/:client_uid/memory", s.withSession(func(c *fiber.Ctx, sess *conversation.Session) error {
		return c.JSON(sess.MemoryState())
	}))
	api.Put("/sessions/:client_uid/compression-rate", s.withSession(func(c *fiber.Ctx, sess *conversation.Session) error {
		var body struct {
			Rate *float64 `json:"rate"`
		}
		if err := decodeJSON(c, &body); err != nil {
			return err
		}
		if body.Rate == nil {
			return fiber.NewError(fiber.StatusBadRequest, `"rate" is missing`)
		}
		st, err := sess.SetCompressionRate(*body.Rate)
		if err != nil {
			return err
		}
		sess.Notify(st)
		return c.JSON(st)
	}))
	api.Get("/sessions/:client_uid/context", s.withSession(func(c *fiber.Ctx, sess *conversation.Session) error {
		rep, err := sess.LastContext()
		if err != nil {
			return err
		}
		return c.JSON(rep)
	}))
	api.Get("/characters/:conf_uid/prompts/:name", func(c *fiber.Ctx) error {
		p, err := hub.Prompt(c.Params("conf_uid"), c.Params("name"))
		if err != nil {
			return err
		}
		return c.JSON(promptBody(c, p.Text, p.Default))
	})
	api.Put("/characters/:conf_uid/prompts/:name", func(c *fiber.Ctx) error {
		var body struct {
			Text *string `json:"text"`
		}
		if err := decodeJSON(c, &body); err != nil {
			return err
		}
		if body.Text == nil {
			return fiber.NewError(fiber.StatusBadRequest, `"text" is missing ("" restores the default)`)
		}
		p, err := hub.SetPrompt(c.Params("conf_uid"), c.Params("name"), *body.Text)
		if err != nil {
			return err
		}
		return c.JSON(promptBody(c, p.Text, p.Default))
	})
	api.Get("/histories/:conf_uid/:history_uid/messages", func(c *fiber.Ctx) error {
		before, limit, err := pageQuery(c)
		if err != nil {
			return err
		}
		page, err := hub.HistoryPage(c.Params("conf_uid"), c.Params("history_uid"), before, limit)
		if err != nil {
			return err
		}
		return c.JSON(page)
	})
	api.Get("/histories/:conf_uid/:history_uid/images/:ref", func(c *fiber.Ctx) error {
		mime, data, err := hub.Image(c.Params("conf_uid"), c.Params("history_uid"), c.Params("ref"))
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, mime)
		c.Set(fiber.HeaderCacheControl, "private, max-age=86400, immutable")
		return c.Send(data)
	})
	overlayAPI(api, hub)
	s.memoryRoutes(api)
	s.knowledgeRoutes(api)
	s.chatRoutes(api)
	s.liveRoutes(api)
}

func promptBody(c *fiber.Ctx, text string, isDefault bool) fiber.Map {
	return fiber.Map{"conf_uid": c.Params("conf_uid"), "name": c.Params("name"), "text": text, "default": isDefault}
}

func (s *Server) withSession(h func(*fiber.Ctx, *conversation.Session) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		sess := s.opts.Hub.Session(c.Params("client_uid"))
		if sess == nil {
			return fiber.NewError(fiber.StatusNotFound, "no open session with that client_uid (GET /api/sessions lists them)")
		}
		return h(c, sess)
	}
}

func decodeJSON(c *fiber.Ctx, v any) error {
	if !strings.HasPrefix(c.Get(fiber.HeaderContentType), fiber.MIMEApplicationJSON) {
		return fiber.NewError(fiber.StatusUnsupportedMediaType, "send a JSON body (Content-Type: application/json)")
	}
	if err := c.BodyParser(v); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "invalid JSON body")
	}
	return nil
}

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
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return c.Status(fe.Code).JSON(fiber.Map{"error": fe.Message})
	}
	p := conversation.Explain(err)
	if p.Kind == koe.Internal {
		s.log.Error("http request failed", "method", c.Method(), "path", quote.Shorten(c.Path(), 200), "err", err)
	}
	return c.Status(problemStatus[p.Kind]).JSON(fiber.Map{"error": p.Message})
}
