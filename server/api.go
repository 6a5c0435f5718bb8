package server

import (
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"koe/history"
	"koe/protocol"
)

// The REST API mirrors koe's memory messages for tools and scripts:
//
//	GET  /api/sessions                          open sessions
//	GET  /api/sessions/:client_uid/memory       memory-state
//	PUT  /api/sessions/:client_uid/compression-rate  {"rate": 0.2}
//	GET  /api/sessions/:client_uid/context      the exact context of the latest LLM call
//	GET  /api/characters/:conf_uid/prompts/:name     name = system | reminder
//	PUT  /api/characters/:conf_uid/prompts/:name     {"text": "..."} ("" = default)
//
// Writes need a JSON body, which browsers never send cross-origin without
// a CORS preflight that koe does not answer, so other web pages cannot
// change a user's prompts.
func (s *Server) apiRoutes() {
	api := s.app.Group("/api")
	api.Get("/sessions", func(c *fiber.Ctx) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		out := []fiber.Map{}
		for uid, ss := range s.live {
			ch := ss.conv.Character()
			out = append(out, fiber.Map{"client_uid": uid, "conf_uid": ch.ConfUID, "conf_name": ch.ConfName, "history_uid": ss.conv.HistoryUID()})
		}
		return c.JSON(out)
	})
	api.Get("/sessions/:client_uid/memory", s.withSession(func(c *fiber.Ctx, ss *session) error {
		return c.JSON(ss.conv.MemoryState())
	}))
	api.Put("/sessions/:client_uid/compression-rate", s.withSession(func(c *fiber.Ctx, ss *session) error {
		var body struct {
			Rate *float64 `json:"rate"`
		}
		if err := decodeJSON(c, &body); err != nil {
			return err
		}
		if body.Rate == nil {
			return fiber.NewError(fiber.StatusBadRequest, `"rate" is missing`)
		}
		if err := ss.conv.SetCompressionRate(*body.Rate); err != nil {
			return fiber.NewError(fiber.StatusBadRequest, err.Error())
		}
		state := ss.conv.MemoryState()
		ss.send(state)
		return c.JSON(state)
	}))
	api.Get("/sessions/:client_uid/context", s.withSession(func(c *fiber.Ctx, ss *session) error {
		rep, err := ss.conv.LastContext()
		if err != nil {
			return fiber.NewError(fiber.StatusNotFound, err.Error())
		}
		return c.JSON(protocol.Context{Type: protocol.TypeContext, ContextReport: rep})
	}))
	api.Get("/characters/:conf_uid/prompts/:name", s.prompt)
	api.Put("/characters/:conf_uid/prompts/:name", s.prompt)
}

func (s *Server) withSession(h func(*fiber.Ctx, *session) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		s.mu.Lock()
		ss := s.live[c.Params("client_uid")]
		s.mu.Unlock()
		if ss == nil {
			return fiber.NewError(fiber.StatusNotFound, "no open session with that client_uid (GET /api/sessions lists them)")
		}
		return h(c, ss)
	}
}

// prompt reads or writes a character's saved prompt.
func (s *Server) prompt(c *fiber.Ctx) error {
	conf, name := c.Params("conf_uid"), c.Params("name")
	if name != history.PromptSystem && name != history.PromptReminder {
		return fiber.NewError(fiber.StatusNotFound, "prompts are named system or reminder")
	}
	store := s.opts.Store
	if c.Method() == fiber.MethodPut {
		var body struct {
			Text *string `json:"text"`
		}
		if err := decodeJSON(c, &body); err != nil {
			return err
		}
		if body.Text == nil {
			return fiber.NewError(fiber.StatusBadRequest, `"text" is missing ("" restores the default)`)
		}
		if err := store.SetPrompt(conf, name, *body.Text); err != nil {
			return storeError(err)
		}
		s.applyPrompts(conf)
	}
	text, ok, err := store.Prompt(conf, name)
	if err != nil {
		return storeError(err)
	}
	return c.JSON(fiber.Map{"conf_uid": conf, "name": name, "text": text, "default": !ok})
}

func decodeJSON(c *fiber.Ctx, v any) error {
	if !strings.HasPrefix(c.Get(fiber.HeaderContentType), fiber.MIMEApplicationJSON) {
		return fiber.NewError(fiber.StatusUnsupportedMediaType, "send a JSON body (Content-Type: application/json)")
	}
	if err := c.BodyParser(v); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "invalid JSON: "+err.Error())
	}
	return nil
}

func storeError(err error) error {
	switch {
	case errors.Is(err, history.ErrInvalidID), errors.Is(err, history.ErrInvalidRecord):
		return fiber.NewError(fiber.StatusBadRequest, err.Error())
	case errors.Is(err, history.ErrNotFound):
		return fiber.NewError(fiber.StatusNotFound, err.Error())
	}
	return err
}

func (s *Server) register(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live[ss.clientUID] = ss
}

func (s *Server) unregister(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, ss.clientUID)
}

// applyPrompts makes every open session of a character use its saved
// prompts from their next LLM call on.
func (s *Server) applyPrompts(confUID string) {
	s.mu.Lock()
	var sessions []*session
	for _, ss := range s.live {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		if ss.conv.Character().ConfUID == confUID {
			ss.conv.ApplyPrompts()
		}
	}
}
