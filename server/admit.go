package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"koe/internal/quote"
)

// Admission: everything koe decides about a request is decided from its
// header block alone, before a byte of its body is held. fasthttp calls
// headerReceived as soon as the header block has arrived and reads the body
// only up to the limit that returns; the body is streamed (see New), so
// even an accepted request costs no more than what its client actually
// sends, never what it declares. guard then asks the same questions of the
// same header block and answers a refused request without reading its body.
//
// A refused request is one of:
//   - ambiguous framing (request smuggling behind a proxy);
//   - a Host koe does not answer to (DNS rebinding);
//   - no token when server.auth_token is set;
//   - a foreign web page's Origin on the API or the WebSocket;
//   - a compressed body (Content-Encoding): a few kilobytes can inflate to
//     gigabytes, and no client of koe needs to compress what it sends;
//   - a declared body over the route's limit: knowledge.max_file_bytes on
//     the upload routes, server.max_message_bytes everywhere else.

// head is what the checks read of a request: its header block and target.
type head struct {
	h   *fasthttp.RequestHeader
	uri *fasthttp.URI
}

func (r head) path() string   { return string(r.uri.PathOriginal()) }
func (r head) method() string { return string(r.h.Method()) }

// verdict is what admission decided about one request.
type verdict struct {
	// refusal, when set, is the answer: the request is not served and its
	// body is not read.
	refusal *fiber.Error
	// limit bounds the body (bytes).
	limit int
	// tokenFromQuery: only ?token= carried the token; a page then gets the
	// cookie and is sent to its address without it.
	tokenFromQuery bool
	// origin is the refused Origin, for the log.
	origin string
	// draining: the refusal is a turn refused while koe drains.
	draining bool
	// uploadSize, when > 0, is the declared size of an upload refused
	// for it: the answer lists it as a refused file.
	uploadSize int64
}

// judge decides about a request from its header block.
func (s *Server) judge(r head) verdict {
	a := s.access
	f := readFraming(r.h.RawHeaders())
	if problem := f.problem(r.h.IsHTTP11()); problem != "" {
		return verdict{refusal: fiber.NewError(fiber.StatusBadRequest, "ambiguous request framing: "+problem+" (RFC 9112); koe closes the connection")}
	}
	if err := a.hostRefusal(r); err != nil {
		return verdict{refusal: err}
	}
	ok, fromQuery := a.tokenOK(r)
	if !ok {
		return verdict{refusal: tokenRefusal()}
	}
	path := r.path()
	// A plain GET of /client-ws is told it is a WebSocket endpoint.
	if underPrefix(path, "/api") || (isRoute(path, "/client-ws") || isRoute(path, realtimeRoute)) && len(r.h.Peek(fiber.HeaderUpgrade)) > 0 {
		if origin := string(r.h.Peek(fiber.HeaderOrigin)); !a.originAllowed(origin, string(r.h.Host())) {
			return verdict{refusal: originRefusal(origin), origin: origin}
		}
	}
	// Draining, a chat turn is refused before its body is read: the
	// client sends it again, and another instance takes it.
	if isTurnRoute(r.method(), path) && s.drain.draining() {
		return verdict{refusal: fiber.NewError(fiber.StatusServiceUnavailable, errDraining.Error()), draining: true}
	}
	hasBody := f.declaredLength() > 0 || len(f.codings) > 0
	if enc := r.h.Peek(fiber.HeaderContentEncoding); hasBody && len(enc) > 0 && !bytes.EqualFold(bytes.TrimSpace(enc), []byte("identity")) {
		return verdict{refusal: fiber.NewError(fiber.StatusUnsupportedMediaType, fmt.Sprintf(
			"koe takes request bodies uncompressed; this one is sent with Content-Encoding %q: send it without", quote.Shorten(string(enc), 40)))}
	}
	upload := isUploadRoute(r.method(), path)
	limit := s.cfg.MaxMessageBytes
	if upload {
		limit = s.maxUpload + uploadOverhead
	}
	// Declared, as it arrived: headerReceived takes a refused request's
	// body away from fasthttp.
	if n := f.declaredLength(); n > int64(limit) {
		v := verdict{refusal: fiber.NewError(fiber.StatusRequestEntityTooLarge, s.tooLargeMessage(upload, n))}
		if upload {
			v.uploadSize = n
		}
		return v
	}
	return verdict{limit: limit, tokenFromQuery: fromQuery}
}

// headerReceived is fasthttp's hook between a request's header block and
// its body: it sets how much of the body fasthttp may read. Of a refused
// request it reads none: the request is told it has no body (guard reads
// the declared one from the raw header block), so that the answer goes out
// at once, without waiting for body bytes that may never come, and the
// connection is closed after it.
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	uri := fasthttp.AcquireURI()
	defer fasthttp.ReleaseURI(uri)
	var v verdict
	if err := uri.Parse(h.Host(), h.RequestURI()); err != nil {
		v.refusal = fiber.ErrBadRequest // fasthttp refuses it itself
	} else {
		v = s.judge(head{h: h, uri: uri})
	}
	if v.refusal != nil {
		h.SetContentLength(0)
		h.Del(fiber.HeaderExpect) // no "100 Continue" for a body never read
		h.SetConnectionClose()
		return fasthttp.RequestConfig{}
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: v.limit}
}

// guard runs first on every request: it marks the connection busy (so
// that shutdown lets the request finish), sets the security headers,
// answers a refused request without reading its body, and reads the body
// of an accepted one within its limit (upload handlers stream theirs).
func (s *Server) guard(c *fiber.Ctx) error {
	handling(c.Context().Conn())
	setSecurityHeaders(&c.Response().Header)
	if err := s.reservedOnly(c); err != nil {
		return err
	}
	if tc, ok := tracked(c.Context().Conn()); ok && tc.line.bareLF {
		c.Context().SetConnectionClose()
		return fiber.NewError(fiber.StatusBadRequest, "ambiguous request framing: "+errBareLF.Error()+" (RFC 9112); koe closes the connection")
	}
	v := s.judge(head{h: &c.Request().Header, uri: c.Request().URI()})
	if v.refusal != nil {
		// The body was not read: the connection cannot carry another
		// request after it.
		s.closeUnread(c)
		switch {
		case v.origin != "":
			s.logRefusedOrigin(v.origin, c.Path(), s.clientIP(c))
		case v.refusal.Code == fiber.StatusUnauthorized:
			c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="koe"`)
		case v.draining:
			return errDraining
		case v.uploadSize > 0:
			return &uploadTooLarge{refused: s.declaredTooLarge(v.uploadSize)}
		}
		return v.refusal
	}
	if v.tokenFromQuery {
		return s.setTokenCookie(c)
	}
	if !isUploadRoute(c.Method(), c.Path()) {
		if err := s.readBody(c, v.limit); err != nil {
			s.closeUnread(c)
			return err
		}
	}
	return c.Next()
}

// closeUnread closes the connection of a request answered before its body
// was read whole, lingering so that the answer reaches a client still
// sending the body.
func (s *Server) closeUnread(c *fiber.Ctx) {
	c.Context().SetConnectionClose()
	if tc, ok := tracked(c.Context().Conn()); ok {
		tc.lingerOnClose()
	}
}

// readBody reads a streamed request body whole, up to limit bytes, as fast
// as the client sends it: the buffer grows with what arrives, not with what
// Content-Length promises.
func (s *Server) readBody(c *fiber.Ctx, limit int) error {
	stream := c.Context().RequestBodyStream()
	if stream == nil {
		return nil
	}
	body, err := readAtMost(stream, limit)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return fiber.NewError(fiber.StatusRequestEntityTooLarge, s.tooLargeMessage(false, -1))
	case err != nil:
		return fiber.NewError(fiber.StatusBadRequest, "the request body could not be read: "+bodyReadProblem(err))
	}
	c.Request().SetBodyRaw(body)
	return nil
}

// errBodyTooLarge is limitedBody's error for a body over its limit.
var errBodyTooLarge = errors.New("request body too large")

// limitedBody reads a request body and fails with errBodyTooLarge once
// more than left bytes came.
type limitedBody struct {
	r    io.Reader
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errBodyTooLarge
	}
	return n, err
}

// readAtMost reads r to its end, or fails once more than limit bytes came.
func readAtMost(r io.Reader, limit int) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(&limitedBody{r: r, left: int64(limit)})
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// bodyReadProblem words a failed body read without quoting what was sent
// when the failure is the transport's.
func bodyReadProblem(err error) string {
	var broken fasthttp.ErrBrokenChunk
	switch {
	case errors.As(err, &broken):
		return "malformed chunked encoding"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "it ended before its declared length"
	}
	return quote.Shorten(err.Error(), 200)
}

// logRefusedOrigin says, at most once a minute, that a foreign web page
// was refused: any page in the user's browser can send requests in a loop.
func (s *Server) logRefusedOrigin(origin, path, ip string) {
	if n, ok := s.refusedOrigins.due(); ok {
		s.log.Warn("request from a foreign web page refused; add its origin to server.allowed_origins if it is yours",
			"origin", quote.Shorten(origin, 120), "path", quote.Shorten(path, 120), "ip", ip, "refused_since_last_log", n)
	}
}
