package server

import (
	"io/fs"

	"github.com/gofiber/fiber/v2"

	"koe/protocol"
)

// The OBS overlay: a page at /overlay (its script and style below it),
// served from koe's embedded pages even when web_client_dir serves
// another client at /, and the API it reads a character's pictures from:
//
//	GET /api/characters/:conf_uid/overlay   (conf_uid "default": the default character)

// Overlays are the characters as the overlay page shows them.
type Overlays interface {
	// Overlay is the view of the character with confUID ("default": the
	// default character).
	Overlay(confUID string) (protocol.OverlayView, error)
}

// overlayFiles are the overlay's routes and the embedded files they serve.
var overlayFiles = []struct{ route, file, typ string }{
	{"/overlay", "overlay.html", pageTypes[".html"]},
	{"/overlay/overlay.js", "overlay.js", pageTypes[".js"]},
	{"/overlay/overlay.css", "overlay.css", pageTypes[".css"]},
}

// overlayRoutes mounts the page; call it before the page mount at /, which
// would otherwise answer for it.
func (s *Server) overlayRoutes(pages fs.FS) {
	if pages == nil {
		return
	}
	for _, f := range overlayFiles {
		s.app.Get(f.route, func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentSecurityPolicy, pageCSP(c))
			file, err := pages.Open(f.file)
			if err != nil {
				return fiber.ErrNotFound
			}
			return serveFile(c, file, f.typ)
		})
	}
}

// overlayAPI serves a character's overlay view under the /api group (its
// origin checks apply).
func (s *Server) overlayAPI(api fiber.Router) {
	api.Get("/characters/:conf_uid/overlay", func(c *fiber.Ctx) error {
		v, err := s.opts.Overlays.Overlay(c.Params("conf_uid"))
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.JSON(v)
	})
}
