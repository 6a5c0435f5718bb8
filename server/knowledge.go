package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strings"

	"github.com/gofiber/fiber/v2"

	"koe/internal/quote"
	"koe/knowledge"
	"koe/protocol"
)

// The knowledge API: a character's documents, and files attached to one
// conversation.
//
//	POST   /api/characters/:conf_uid/documents          multipart "file" parts: add or replace documents
//	GET    /api/characters/:conf_uid/documents          the character's documents, their tokens, the size limit
//	DELETE /api/characters/:conf_uid/documents/:id      one document and its chunks
//	POST   /api/histories/:conf_uid/:history_uid/files  one multipart "file" part: attach it here
//
// A file's name is the one its part gives; the knowledge service keeps
// only its last element, and nothing here touches the file system.
func (s *Server) knowledgeRoutes(api fiber.Router) {
	api.Post("/characters/:conf_uid/documents", s.withDocuments(func(c *fiber.Ctx) error {
		conf := param(c, "conf_uid")
		files, err := s.uploadedFiles(c)
		if err != nil {
			return err
		}
		ctx, done := s.clientContext(c)
		defer done()
		added, refused := []knowledge.Document{}, []*knowledge.FileError{}
		for _, f := range files {
			d, err := s.opts.Documents.Add(ctx, conf, f)
			var fe *knowledge.FileError
			switch {
			case errors.As(err, &fe):
				refused = append(refused, fe)
			case err != nil && ctx.Err() != nil:
				return s.ingestStopped(c, fiber.Map{"conf_uid": conf, "added": added, "refused": refused}, f.Name)
			case err != nil:
				return err
			default:
				added = append(added, d)
			}
		}
		body := fiber.Map{"conf_uid": conf, "added": added, "refused": refused}
		if len(added) == 0 {
			return refusal(c, body, refused)
		}
		return c.Status(fiber.StatusCreated).JSON(body)
	}))
	api.Get("/characters/:conf_uid/documents", s.withDocuments(func(c *fiber.Ctx) error {
		conf := param(c, "conf_uid")
		docs, err := s.opts.Documents.List(s.base, conf)
		if err != nil {
			return err
		}
		tokens := 0
		for _, d := range docs {
			tokens += d.Tokens
		}
		// max_file_bytes lets a page refuse a file too large to send
		// before sending it: koe ends the connection of a body over the
		// limit, and a browser may see that before the answer.
		return c.JSON(fiber.Map{"conf_uid": conf, "documents": docs, "tokens": tokens, "max_file_bytes": s.maxUpload})
	}))
	api.Delete("/characters/:conf_uid/documents/:id", s.withDocuments(func(c *fiber.Ctx) error {
		if err := s.opts.Documents.Delete(s.base, param(c, "conf_uid"), param(c, "id")); err != nil {
			return err
		}
		return c.JSON(fiber.Map{"deleted": true})
	}))
	api.Post("/histories/:conf_uid/:history_uid/files", func(c *fiber.Ctx) error {
		uid := param(c, "history_uid")
		files, err := s.uploadedFiles(c)
		if err != nil {
			return err
		}
		if len(files) > 1 {
			return fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf(`attach one file per request (this one has %d "%s" parts)`, len(files), uploadField))
		}
		ctx, done := s.clientContext(c)
		defer done()
		f, err := s.opts.Attachments.AttachFile(ctx, param(c, "conf_uid"), uid, files[0])
		var fe *knowledge.FileError
		if errors.As(err, &fe) {
			return refusal(c, fiber.Map{"history_uid": uid, "refused": []*knowledge.FileError{fe}}, []*knowledge.FileError{fe})
		}
		if err != nil && ctx.Err() != nil {
			return s.ingestStopped(c, fiber.Map{"history_uid": uid}, files[0].Name)
		}
		if err != nil {
			return err
		}
		return c.Status(fiber.StatusCreated).JSON(fiber.Map{"history_uid": uid, "file": f})
	})
}

// Documents are the characters' knowledge bases.
type Documents interface {
	// Add reads a file into a character's knowledge base, replacing the
	// one of the same name. A refusal is a *knowledge.FileError.
	Add(ctx context.Context, confUID string, u knowledge.Upload) (knowledge.Document, error)
	// List lists a character's knowledge base.
	List(ctx context.Context, confUID string) ([]knowledge.Document, error)
	// Delete removes one document and its chunks.
	Delete(ctx context.Context, confUID, id string) error
}

// Attachments attach files to stored conversations.
type Attachments interface {
	// AttachFile attaches a file to a history at its end: its sessions
	// read it from their next turn. A refusal is a *knowledge.FileError.
	AttachFile(ctx context.Context, confUID, historyUID string, u knowledge.Upload) (protocol.AttachedFile, error)
}

// withDocuments answers as koe's knowledge service does when there is
// none.
func (s *Server) withDocuments(h fiber.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if s.opts.Documents == nil {
			return fiber.NewError(fiber.StatusBadGateway, "koe runs without files and documents")
		}
		return h(c)
	}
}

// uploadField is the multipart field that carries files.
const uploadField = "file"

// uploadOverhead is what a multipart body may hold besides its files'
// bytes: boundaries, part headers, a few form fields.
const uploadOverhead = 64 << 10

// refusalStatus is the HTTP status of a refused file.
var refusalStatus = map[knowledge.FileErrorKind]int{
	knowledge.ErrKindTooLarge:   fiber.StatusRequestEntityTooLarge,
	knowledge.ErrKindInflated:   fiber.StatusRequestEntityTooLarge,
	knowledge.ErrKindType:       fiber.StatusUnsupportedMediaType,
	knowledge.ErrKindBusy:       fiber.StatusConflict,
	knowledge.ErrKindOverloaded: fiber.StatusServiceUnavailable,
}

// refusal answers a request none of whose files was taken: the status of
// the first refusal, the whole list in body, and the first one's words.
func refusal(c *fiber.Ctx, body fiber.Map, refused []*knowledge.FileError) error {
	first := refused[0]
	status, ok := refusalStatus[first.Kind]
	if !ok {
		status = fiber.StatusUnprocessableEntity
	}
	if status == fiber.StatusServiceUnavailable {
		c.Set(fiber.HeaderRetryAfter, retryAfterSeconds)
	}
	msg := first.Error()
	if first.Filename == "" {
		msg = first.Reason // refused before its name was read
	}
	if n := len(refused); n > 1 {
		msg = fmt.Sprintf("none of the %d files was taken; the first: %s", n, msg)
	}
	body["error"] = msg
	return c.Status(status).JSON(body)
}

// uploadedFiles reads the request's "file" parts as the client sends
// them, each file's bytes held once and the body's total bounded by
// knowledge.max_file_bytes, rather than first buffering the whole body
// (and rather than fasthttp's form parser, which puts large files on disk).
func (s *Server) uploadedFiles(c *fiber.Ctx) ([]knowledge.Upload, error) {
	ctype, params, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || ctype != fiber.MIMEMultipartForm || params["boundary"] == "" {
		return nil, fiber.NewError(fiber.StatusUnsupportedMediaType,
			fmt.Sprintf(`send the files as multipart/form-data, each in a part named "%s"`, uploadField))
	}
	body := c.Context().RequestBodyStream()
	if body == nil {
		body = bytes.NewReader(c.Request().Body())
	}
	r := multipart.NewReader(&limitedBody{r: body, left: int64(s.maxUpload + uploadOverhead)}, params["boundary"])
	var files []knowledge.Upload
	// taken names the files read whole so far: a body cut at its limit
	// refuses them with the one it was cut in.
	taken := func() []string {
		names := make([]string, len(files))
		for i, f := range files {
			names[i] = f.Name
		}
		return names
	}
	for {
		part, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.closeUnread(c)
			return nil, s.uploadReadError(err, "", 0, taken())
		}
		if part.FormName() != uploadField {
			_, err := io.Copy(io.Discard, part)
			_ = part.Close()
			if err != nil {
				s.closeUnread(c)
				return nil, s.uploadReadError(err, "", 0, taken())
			}
			continue
		}
		data, err := io.ReadAll(part)
		_ = part.Close()
		if err != nil {
			s.closeUnread(c)
			return nil, s.uploadReadError(err, part.FileName(), len(data), taken())
		}
		// FileName is the last element of the part's filename; an empty
		// one is refused by the knowledge service, by name.
		files = append(files, knowledge.Upload{Name: part.FileName(), Mime: partType(part), Data: data})
	}
	if len(files) == 0 {
		return nil, fiber.NewError(fiber.StatusBadRequest,
			fmt.Sprintf(`the request has no "%s" part: send each file in a multipart/form-data part named "%s"`, uploadField, uploadField))
	}
	return files, nil
}

// uploadReadError answers an upload whose body could not be read whole,
// in the part of file name (read bytes of it read), after the files
// taken.
func (s *Server) uploadReadError(err error, name string, read int, taken []string) error {
	if isBodyTooLarge(err) {
		return s.cutTooLarge(name, read, taken)
	}
	return fiber.NewError(fiber.StatusBadRequest, "the multipart body does not parse: "+bodyReadProblem(err))
}

// partType is the media type a part declares, without parameters ("" if
// none or the generic one: the knowledge service then goes by the name
// and the content).
func partType(p *multipart.Part) string {
	t, _, err := mime.ParseMediaType(p.Header.Get(fiber.HeaderContentType))
	if err != nil || t == "application/octet-stream" {
		return ""
	}
	return t
}

// isUploadRoute reports whether a request is one of the upload routes,
// whose bodies may be as large as knowledge.max_file_bytes allows; it
// matches paths as fiber does (any case, with or without a trailing
// slash).
func isUploadRoute(method, path string) bool {
	_, ok := uploadRouteOf(method, path)
	return ok
}

// uploadRoute is what the path of an upload names: a character's
// documents (history empty) or one of its histories' files.
type uploadRoute struct{ conf, history string }

// uploadRouteOf reads an upload route's path, before fiber has matched it
// to its parameters.
func uploadRouteOf(method, path string) (uploadRoute, bool) {
	if method != fiber.MethodPost {
		return uploadRoute{}, false
	}
	seg := strings.Split(strings.TrimSuffix(path, "/"), "/")
	switch {
	case len(seg) == 5 && seg[0] == "" && strings.EqualFold(seg[1], "api") && strings.EqualFold(seg[2], "characters") &&
		seg[3] != "" && strings.EqualFold(seg[4], "documents"):
		return uploadRoute{conf: seg[3]}, true
	case len(seg) == 6 && seg[0] == "" && strings.EqualFold(seg[1], "api") && strings.EqualFold(seg[2], "histories") &&
		seg[3] != "" && seg[4] != "" && strings.EqualFold(seg[5], "files"):
		return uploadRoute{conf: seg[3], history: seg[4]}, true
	}
	return uploadRoute{}, false
}

// tooLargeMessage words the refusal of a body over its route's limit;
// size is the declared size, or -1 when the body was cut while read.
func (s *Server) tooLargeMessage(upload bool, size int64) string {
	if upload {
		return fmt.Sprintf("Request Entity Too Large: one upload may carry at most knowledge.max_file_bytes (%s) of files; send large files one per request",
			quote.Bytes(int64(s.maxUpload)))
	}
	msg := "Request Entity Too Large: "
	if size >= 0 {
		msg += "the body is " + quote.Bytes(size) + "; "
	}
	return msg + "server.max_message_bytes allows " + quote.Bytes(int64(s.cfg.MaxMessageBytes)) +
		" (files go to the upload routes, up to knowledge.max_file_bytes)"
}
