package server

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// byContent marks extensions whose Content-Type koe takes from the file's
// first bytes, serving the file only if they are a PNG, JPEG, WebP or GIF.
const byContent = "image/*"

const octetStream = "application/octet-stream"

// What each mount serves, by extension; anything else answers 404. Types
// come from these tables only, so a file can never be served as HTML or
// SVG (script under koe's origin) unless it is one of the pages.
var (
	// imageTypes are backgrounds and avatars: raster pictures only.
	imageTypes = map[string]string{".png": byContent, ".jpg": byContent, ".jpeg": byContent, ".webp": byContent, ".gif": byContent}

	// modelTypes are Live2D models: Cubism 3+ (.model3.json, .moc3,
	// .motion3.json, .physics3.json, .exp3.json ...), Cubism 2 (.moc,
	// .mtn), textures and the sounds that motions may play.
	modelTypes = map[string]string{
		".json": "application/json", ".moc3": octetStream, ".moc": octetStream, ".mtn": octetStream,
		".png": byContent, ".jpg": byContent, ".jpeg": byContent, ".webp": byContent,
		".wav": "audio/wav", ".mp3": "audio/mpeg", ".ogg": "audio/ogg",
	}

	// pageTypes are web pages: koe's own and a built web client (the OLV
	// client's build holds scripts, styles, fonts, icons, WebAssembly and
	// ONNX models for its voice detection, and Live2D files of its own).
	pageTypes = map[string]string{
		".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8", ".json": "application/json", ".map": "application/json",
		".webmanifest": "application/manifest+json", ".txt": "text/plain; charset=utf-8",
		".wasm": "application/wasm", ".onnx": octetStream, ".moc3": octetStream,
		".svg": "image/svg+xml", ".ico": "image/x-icon",
		".png": byContent, ".jpg": byContent, ".jpeg": byContent, ".webp": byContent, ".gif": byContent,
		".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf",
		".wav": "audio/wav", ".mp3": "audio/mpeg", ".ogg": "audio/ogg",
	}
)

// isImage reports whether a file name is one koe would serve from
// backgrounds_dir or avatars_dir (fetch-backgrounds lists only these).
func isImage(name string) bool {
	_, ok := imageTypes[strings.ToLower(path.Ext(name))]
	return ok
}

// fileMount serves one folder read-only under a URL prefix.
type fileMount struct {
	prefix string // "" for the root
	types  map[string]string
	// open opens a slash-separated path inside the folder; for folders on
	// disk it goes through os.Root, so a symbolic link cannot lead out.
	open func(name string) (fs.File, error)
	// index serves index.html for the folder's root and subfolders.
	index bool
	// csp returns the Content-Security-Policy for this mount's files; nil
	// keeps the strict default.
	csp func(c *fiber.Ctx) string
}

// dirOpener opens files inside dir through os.Root. The root is opened per
// request: a folder created or replaced while koe runs is served as it is.
func dirOpener(dir string) func(string) (fs.File, error) {
	return func(name string) (fs.File, error) {
		if name == "" {
			name = "."
		}
		return os.OpenInRoot(dir, name)
	}
}

func (m *fileMount) serve(c *fiber.Ctx) error {
	method := c.Method()
	if method != fiber.MethodGet && method != fiber.MethodHead {
		return c.Next()
	}
	name, ok := m.relPath(string(c.Request().URI().PathOriginal()))
	if !ok {
		return fiber.NewError(fiber.StatusBadRequest, "that path is not allowed")
	}
	if m.csp != nil {
		c.Set(fiber.HeaderContentSecurityPolicy, m.csp(c))
	}
	if m.index && (name == "" || strings.HasSuffix(name, "/")) {
		name += "index.html"
	}
	typ, ok := m.types[strings.ToLower(path.Ext(name))]
	if !ok {
		return fiber.ErrNotFound
	}
	f, err := m.open(strings.TrimSuffix(name, "/"))
	if err != nil {
		return fiber.ErrNotFound
	}
	return serveFile(c, f, typ)
}

// relPath turns the raw request path into a path inside the folder: ""
// for the folder itself, a trailing slash for a subfolder. Encoded or
// plain ".." segments, backslashes and NULs are refused outright.
func (m *fileMount) relPath(raw string) (string, bool) {
	// fiber matched the mount on the raw path, case-insensitively.
	if len(raw) < len(m.prefix) || !strings.EqualFold(raw[:len(m.prefix)], m.prefix) {
		return "", false
	}
	rest, err := url.PathUnescape(raw[len(m.prefix):])
	if err != nil || strings.ContainsAny(rest, "\\\x00") || (rest != "" && rest[0] != '/') {
		return "", false
	}
	rest = strings.TrimPrefix(rest, "/")
	name := strings.TrimSuffix(rest, "/")
	if name != "" && !fs.ValidPath(name) {
		return "", false
	}
	return rest, true
}

// serveFile sends a regular file (and closes it), refusing folders and
// pictures whose bytes are not a picture.
func serveFile(c *fiber.Ctx, f fs.File, typ string) error {
	keep := false
	defer func() {
		if !keep {
			_ = f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return fiber.ErrNotFound // folders are never listed
	}
	if typ == byContent {
		if typ, err = pictureType(f); err != nil {
			return fiber.NewError(fiber.StatusNotFound, "not found: the file is not a PNG, JPEG, WebP or GIF picture")
		}
	}
	if mod := st.ModTime(); !mod.IsZero() {
		mod = mod.UTC().Truncate(time.Second)
		if since, err := http.ParseTime(c.Get(fiber.HeaderIfModifiedSince)); err == nil && !mod.After(since) {
			return c.SendStatus(fiber.StatusNotModified)
		}
		c.Set(fiber.HeaderLastModified, mod.Format(http.TimeFormat))
	}
	c.Set(fiber.HeaderContentType, typ)
	if c.Method() == fiber.MethodHead {
		c.Response().Header.SetContentLength(int(st.Size()))
		c.Response().SkipBody = true
		return nil
	}
	keep = true // fasthttp closes the stream once it is sent
	c.Response().SetBodyStream(f, int(st.Size()))
	return nil
}

var errNotPicture = errors.New("not a picture")

// pictureType reads the first bytes of f, rewinds it, and names the format.
func pictureType(f fs.File) (string, error) {
	seeker, ok := f.(io.Seeker)
	if !ok {
		return "", errNotPicture
	}
	head := make([]byte, 12)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if _, err := seeker.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png", nil
	case bytes.HasPrefix(head, []byte("\xff\xd8\xff")):
		return "image/jpeg", nil
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return "image/gif", nil
	case len(head) == 12 && string(head[:4]) == "RIFF" && string(head[8:]) == "WEBP":
		return "image/webp", nil
	}
	return "", errNotPicture
}
