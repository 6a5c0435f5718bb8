package server

import (
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// Content-Security-Policy for what koe serves. Every response starts with
// strictCSP: JSON, pictures and model files have no business running
// anything, even when opened directly. The page mounts replace it.
const (
	strictCSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; sandbox"

	// webClientCSP is for a web client build koe does not know (the OLV
	// client): it loads styles inline, WebAssembly, models and a WebSocket
	// and server the user types in, so only what no client needs is cut:
	// plugins, foreign <base> and framing by other sites.
	webClientCSP = "object-src 'none'; base-uri 'self'; frame-ancestors 'self'; form-action 'self'"
)

// pageCSP is for koe's own page: its scripts, styles and worklet from koe,
// sound from blob: and data: URLs, and the WebSocket back to the address
// the page came from (named in full too, for browsers whose 'self' does not
// cover ws:).
func pageCSP(c *fiber.Ctx) string {
	connect := "'self'"
	if host := string(c.Request().Header.Host()); safeCSPHost(host) {
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
		"media-src 'self' data: blob:; connect-src " + connect + "; worker-src 'self'; font-src 'self'; " +
		"manifest-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

// safeCSPHost accepts Host values that cannot change a policy's meaning
// when written into it.
func safeCSPHost(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:[]", r)) {
			return false
		}
	}
	return true
}

// setSecurityHeaders starts every response with nosniff and the strict
// policy; handlers that serve pages replace the policy.
func setSecurityHeaders(h *fasthttp.ResponseHeader) {
	h.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	h.Set(fiber.HeaderContentSecurityPolicy, strictCSP)
}
