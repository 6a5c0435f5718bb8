package server

import (
	"io/fs"

	"github.com/gofiber/fiber/v2"
)

// faviconRoute answers /favicon.ico, which every browser asks for (OBS's
// browser source included) whatever page it shows: the web client's own
// icon when web_client_dir has one, koe's otherwise, so the request never
// ends in a 404 in the browser's console or koe's access log. Call it
// before the page mount at /.
func (s *Server) faviconRoute(pages fs.FS) {
	typ := pageTypes[".ico"]
	s.app.Get("/favicon.ico", func(c *fiber.Ctx) error {
		if dir := s.cfg.WebClientDir; dir != "" {
			if f, err := dirOpener(dir)("favicon.ico"); err == nil {
				return serveFile(c, f, typ)
			}
		}
		if pages == nil {
			return fiber.ErrNotFound
		}
		f, err := pages.Open("favicon.ico")
		if err != nil {
			return fiber.ErrNotFound
		}
		return serveFile(c, f, typ)
	})
}
