package server_test

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func pngBytes(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewRGBA(image.Rect(0, 0, 4, 4)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gifBytes(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, image.NewPaletted(image.Rect(0, 0, 4, 4), color.Palette{color.Black}), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpBytes is a lossless 1x1 WebP (the container and VP8L header).
var webpBytes = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")

const secret = "root:x:0:0:secret-marker"

// Asset folders serve only what their users need, with types from koe's own
// table, never script or markup, and nothing outside the folder.
func TestAssetFolders(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.png"), []byte(secret))
	cfg.Server.Live2DModelsDir = filepath.Join(t.TempDir(), "live2d")
	cfg.Server.BackgroundsDir = filepath.Join(t.TempDir(), "bg")
	cfg.Server.AvatarsDir = filepath.Join(t.TempDir(), "avatars")
	models, bg, avatars := cfg.Server.Live2DModelsDir, cfg.Server.BackgroundsDir, cfg.Server.AvatarsDir
	writeFile(t, filepath.Join(models, "mao", "mao.model3.json"), []byte(`{"Version":3}`))
	writeFile(t, filepath.Join(models, "mao", "motions", "idle.motion3.json"), []byte(`{}`))
	writeFile(t, filepath.Join(models, "mao", "mao.moc3"), []byte("MOC3\x00\x00"))
	writeFile(t, filepath.Join(models, "mao", "texture_00.png"), pngBytes(t))
	writeFile(t, filepath.Join(models, "mao", "sounds", "hi.wav"), []byte("RIFF\x00\x00\x00\x00WAVEfmt "))
	writeFile(t, filepath.Join(models, "evil.html"), []byte("<script>alert(document.domain)</script>"))
	writeFile(t, filepath.Join(models, "x.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`))
	writeFile(t, filepath.Join(bg, "room.png"), pngBytes(t))
	writeFile(t, filepath.Join(bg, "photo.jpg"), jpegBytes(t))
	writeFile(t, filepath.Join(bg, "fake.png"), []byte("<html><script>alert(1)</script></html>"))
	writeFile(t, filepath.Join(avatars, "a.gif"), gifBytes(t))
	writeFile(t, filepath.Join(avatars, "b.webp"), webpBytes)
	writeFile(t, filepath.Join(avatars, "c.png"), jpegBytes(t)) // misnamed: served as what it is
	for link, target := range map[string]string{
		filepath.Join(bg, "passwd.png"):  filepath.Join(outside, "secret.png"),
		filepath.Join(bg, "inside.png"):  "room.png",
		filepath.Join(bg, "escape"):      outside,
		filepath.Join(avatars, "up.png"): "../bg/room.png",
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	m := startKoe(t, cfg)
	addr := m.Addr()

	for path, want := range map[string]string{ // path: Content-Type, or "" for refused
		"/live2d-models/mao/mao.model3.json":           "application/json",
		"/live2d-models/mao/motions/idle.motion3.json": "application/json",
		"/live2d-models/mao/mao.moc3":                  "application/octet-stream",
		"/live2d-models/mao/texture_00.png":            "image/png",
		"/live2d-models/mao/sounds/hi.wav":             "audio/wav",
		"/live2d-models/evil.html":                     "",
		"/live2d-models/x.svg":                         "",
		"/live2d-models/mao/":                          "",
		"/live2d-models/mao":                           "",
		"/live2d-models/":                              "",
		"/bg/room.png":                                 "image/png",
		"/bg/photo.jpg":                                "image/jpeg",
		"/bg/inside.png":                               "image/png",
		"/bg/fake.png":                                 "",
		"/bg/passwd.png":                               "",
		"/bg/escape/secret.png":                        "",
		"/bg/missing.png":                              "",
		"/avatars/a.gif":                               "image/gif",
		"/avatars/b.webp":                              "image/webp",
		"/avatars/c.png":                               "image/jpeg",
		"/avatars/up.png":                              "",
		"/bg/../../" + strings.TrimPrefix(outside, "/") + "/secret.png": "",
		"/bg/..%2f..%2f..%2fetc%2fpasswd":                               "",
		"/bg/%2e%2e/%2e%2e/%2e%2e/etc/passwd":                           "",
		"/bg/..\\..\\..\\etc\\passwd":                                   "",
		"/bg/room.png%00.html":                                          "",
	} {
		r := rawGet(t, addr, path, addr)
		switch {
		case want == "" && r.status == 200:
			t.Errorf("GET %s served (%s): %.60q", path, r.header.Get("Content-Type"), r.body)
		case want != "" && (r.status != 200 || r.header.Get("Content-Type") != want):
			t.Errorf("GET %s = %d %q, want 200 %q", path, r.status, r.header.Get("Content-Type"), want)
		}
		if strings.Contains(r.body, secret) {
			t.Errorf("GET %s leaked a file from outside the folder", path)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s has no X-Content-Type-Options: nosniff", path)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s has CSP %q, want a strict one", path, csp)
		}
	}

	head := rawExchangeOne(t, addr, "HEAD /bg/room.png HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n")
	if head.status != 200 || head.header.Get("Content-Length") != strconv.Itoa(len(pngBytes(t))) || head.body != "" {
		t.Errorf("HEAD /bg/room.png = %d, length %q, body %q", head.status, head.header.Get("Content-Length"), head.body)
	}
	// Background listings name only files koe will serve.
	c := dialGreeted(t, addr)
	files := c.request(msg{"type": "fetch-backgrounds"}, "background-files")["files"].([]any)
	for _, f := range files {
		if f == "passwd.png" {
			t.Errorf("fetch-backgrounds lists a link leading out of the folder: %v", files)
		}
	}
}

// Every response carries nosniff and a CSP; koe's own page gets a strict
// one it works under, the OLV client folder one that the stock client
// works under.
func TestSecurityHeaders(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	m := startKoe(t, cfg)
	addr := m.Addr()
	for _, path := range []string{"/", "/koe.js", "/healthz", "/api/sessions", "/nope", "/client-ws"} {
		r := rawGet(t, addr, path, addr)
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s (%d) has no nosniff", path, r.status)
		}
		csp := r.header.Get("Content-Security-Policy")
		for _, d := range []string{"frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, d) && !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("GET %s: CSP %q lacks %s", path, csp, d)
			}
		}
	}
	page := rawGet(t, addr, "/", addr)
	if page.status != 200 || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(page.header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("koe's page: %d %q CSP %q", page.status, page.header.Get("Content-Type"), page.header.Get("Content-Security-Policy"))
	}

	cfg = testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.WebClientDir = t.TempDir()
	web := cfg.Server.WebClientDir
	writeFile(t, filepath.Join(web, "index.html"), []byte("<!doctype html><title>olv</title>"))
	writeFile(t, filepath.Join(web, "assets", "index-abc.js"), []byte("console.log(1)"))
	writeFile(t, filepath.Join(web, "favicon.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`))
	writeFile(t, filepath.Join(web, "libs", "ort-wasm.wasm"), []byte("\x00asm\x01\x00\x00\x00"))
	writeFile(t, filepath.Join(web, ".env"), []byte("OPENAI_API_KEY=sk-x"))
	m = startKoe(t, cfg)
	addr = m.Addr()
	for path, want := range map[string]string{
		"/":                    "text/html; charset=utf-8",
		"/index.html":          "text/html; charset=utf-8",
		"/assets/index-abc.js": "text/javascript; charset=utf-8",
		"/favicon.svg":         "image/svg+xml",
		"/libs/ort-wasm.wasm":  "application/wasm",
		"/assets/":             "",
		"/.env":                "",
	} {
		r := rawGet(t, addr, path, addr)
		if want == "" {
			if r.status == 200 {
				t.Errorf("GET %s served", path)
			}
			continue
		}
		if r.status != 200 || r.header.Get("Content-Type") != want {
			t.Errorf("GET %s = %d %q, want %q", path, r.status, r.header.Get("Content-Type"), want)
		}
		csp := r.header.Get("Content-Security-Policy")
		for _, d := range []string{"frame-ancestors", "object-src 'none'", "base-uri"} {
			if !strings.Contains(csp, d) {
				t.Errorf("GET %s: CSP %q lacks %s", path, csp, d)
			}
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s has no nosniff", path)
		}
	}
}
