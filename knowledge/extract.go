package knowledge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"koe/internal/pdftext"
	"koe/internal/quote"
)

// readsWhat ends every refusal of a type: what koe does read.
const readsWhat = "koe reads text, Markdown, HTML, PDF, JSON and source code"

// maxInvalidBytes is how many bytes that are not UTF-8 a text file may
// hold and still be read, each shown as U+FFFD: a file cut inside a
// character, a stray byte from a copy and paste. More means another
// encoding (Latin-1, Shift JIS…), whose text would come out garbled in
// every answer; the user is asked to save it as UTF-8 instead.
const maxInvalidBytes = 8

// sniffBytes is how much of a file decides whether it is binary.
const sniffBytes = 8000

// codeExtensions are the source and configuration files read as code:
// kept as they are, cut at lines, without headings.
var codeExtensions = map[string]bool{
	".go": true, ".py": true, ".js": true, ".mjs": true, ".cjs": true, ".ts": true, ".tsx": true, ".jsx": true,
	".java": true, ".kt": true, ".kts": true, ".scala": true, ".c": true, ".h": true, ".cc": true, ".cpp": true,
	".cxx": true, ".hpp": true, ".hh": true, ".cs": true, ".rs": true, ".rb": true, ".php": true, ".pl": true,
	".lua": true, ".swift": true, ".m": true, ".r": true, ".jl": true, ".dart": true, ".ex": true, ".exs": true,
	".erl": true, ".hs": true, ".ml": true, ".clj": true, ".el": true, ".vim": true, ".zig": true, ".nim": true,
	".sh": true, ".bash": true, ".zsh": true, ".fish": true, ".ps1": true, ".bat": true,
	".yaml": true, ".yml": true, ".toml": true, ".ini": true, ".cfg": true, ".conf": true, ".env": true,
	".properties": true, ".xml": true, ".sql": true, ".css": true, ".scss": true, ".sass": true, ".less": true,
	".vue": true, ".svelte": true, ".proto": true, ".graphql": true, ".gradle": true, ".cmake": true,
	".mk": true, ".tf": true, ".nix": true, ".dockerfile": true, ".diff": true, ".patch": true,
}

// codeNames are source files known by their whole name.
var codeNames = map[string]bool{"makefile": true, "dockerfile": true, "gemfile": true, "rakefile": true, "justfile": true}

// Extract reads a file's text. name and mime are what the uploader said;
// the bytes decide first (a browser often sends application/octet-stream,
// or a type from the name), then the name's extension, then mime. A file
// koe cannot read is a *FileError; ctx ends a PDF's extraction between
// pages.
func Extract(ctx context.Context, name, mime string, data []byte) (Text, error) {
	return extract(ctx, name, mime, data, DefaultMaxInflatedBytes)
}

// extract is Extract within knowledge.max_inflated_bytes.
func extract(ctx context.Context, name, mime string, data []byte, maxInflated int) (Text, error) {
	refuse := func(kind FileErrorKind, format string, args ...any) (Text, error) {
		return Text{}, &FileError{Filename: name, Reason: fmt.Sprintf(format, args...), Kind: kind}
	}
	if err := ctx.Err(); err != nil {
		return Text{}, err
	}
	if len(data) == 0 {
		return refuse(ErrKindEmpty, "is empty")
	}
	ext := strings.ToLower(filepath.Ext(name))
	mime = strings.ToLower(strings.TrimSpace(strings.Split(mime, ";")[0]))

	if bytes.HasPrefix(data, []byte("%PDF-")) {
		return extractPDF(ctx, name, data, maxInflated)
	}
	if ext == ".pdf" || mime == "application/pdf" {
		if kind := binaryKind(data); kind != "" {
			return refuse(ErrKindType, "is named a PDF but is %s; %s", kind, readsWhat)
		}
		return refuse(ErrKindCorrupt, "is not a PDF: it does not start with %%PDF-, as every PDF does")
	}
	data = utf16ToUTF8(data)
	if kind := binaryKind(data); kind != "" {
		return refuse(ErrKindType, "is %s; %s", kind, readsWhat)
	}
	text, invalid, firstLine := decodeUTF8(data)
	if invalid > maxInvalidBytes {
		return refuse(ErrKindCorrupt, "is not UTF-8 text (%d bytes are not UTF-8, the first on line %d); save it as UTF-8 and upload it again", invalid, firstLine)
	}
	if blank(text) {
		return refuse(ErrKindEmpty, "holds only white space")
	}

	switch format := textFormat(ext, mime, filepath.Base(name), text); format {
	case "json":
		// Checked first, without writing: Indent writes as it goes, and
		// deeply nested JSON indents to thousands of times its size (a
		// megabyte of brackets, to gigabytes). Unmarshal checks the
		// syntax before it decodes, and says where the error is.
		if !json.Valid([]byte(text)) {
			return refuse(ErrKindCorrupt, "is not valid JSON: %s", jsonErrorAt(text, json.Unmarshal([]byte(text), new(json.RawMessage))))
		}
		if indentedSize(text, maxInflated) > maxInflated {
			return refuse(ErrKindInflated, "is JSON nested so deep that, indented, it would be more than knowledge.max_inflated_bytes allows (%s)", quote.Bytes(int64(maxInflated)))
		}
		var out bytes.Buffer
		if err := json.Indent(&out, []byte(text), "", "  "); err != nil {
			return refuse(ErrKindCorrupt, "is not valid JSON: %s", jsonErrorAt(text, err))
		}
		return Text{Body: out.String(), Format: format}, nil
	case "html":
		body, title := htmlText(text)
		if blank(body) {
			return refuse(ErrKindEmpty, "is an HTML page without text to read (outside its scripts, styles and menus)")
		}
		return Text{Body: body, Format: format, Title: title}, nil
	case "markdown":
		return Text{Body: text, Format: format, Title: markdownTitle(text)}, nil
	default:
		return Text{Body: text, Format: format}, nil
	}
}

// textFormat tells what a text file is: by its extension, then its mime,
// then its first bytes.
func textFormat(ext, mime, base, text string) string {
	switch {
	case ext == ".md" || ext == ".markdown" || ext == ".mdown" || ext == ".mkd":
		return "markdown"
	case ext == ".html" || ext == ".htm" || ext == ".xhtml":
		return "html"
	case ext == ".json" || ext == ".geojson" || ext == ".webmanifest":
		return "json"
	case codeExtensions[ext] || codeNames[strings.ToLower(base)]:
		return "code"
	case ext == ".txt" || ext == ".text" || ext == ".log" || ext == ".csv" || ext == ".tsv":
		return "text"
	case mime == "text/markdown" || mime == "text/x-markdown":
		return "markdown"
	case mime == "text/html" || mime == "application/xhtml+xml":
		return "html"
	case mime == "application/json" || strings.HasSuffix(mime, "+json"):
		return "json"
	}
	head := strings.ToLower(strings.TrimSpace(text[:min(len(text), 512)]))
	if strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html") {
		return "html"
	}
	return "text"
}

// binaryKind names what a file is when it is not text ("" when it is):
// the kind http.DetectContentType finds, or "a binary file" for bytes
// it does not know that hold a NUL, which text never does.
func binaryKind(data []byte) string {
	kind, _, _ := strings.Cut(http.DetectContentType(data), ";")
	switch {
	case strings.HasPrefix(kind, "text/"), kind == "application/json":
		return ""
	case strings.HasPrefix(kind, "image/"):
		return "an image (" + kind + ")"
	case strings.HasPrefix(kind, "audio/"), kind == "application/ogg":
		return "audio (" + kind + ")"
	case strings.HasPrefix(kind, "video/"):
		return "a video (" + kind + ")"
	case strings.HasPrefix(kind, "font/"), kind == "application/vnd.ms-fontobject":
		return "a font (" + kind + ")"
	case kind == "application/zip", kind == "application/x-gzip", kind == "application/x-rar-compressed", kind == "application/x-7z-compressed":
		return "an archive (" + kind + ")"
	case kind != "application/octet-stream":
		return "a binary file (" + kind + ")"
	}
	if bytes.IndexByte(data[:min(len(data), sniffBytes)], 0) >= 0 {
		return "a binary file (application/octet-stream)"
	}
	return ""
}

// utf16ToUTF8 re-encodes a file that starts with a UTF-16 byte order mark
// (Windows' "Unicode" text); other files are returned as they are.
func utf16ToUTF8(data []byte) []byte {
	var big bool
	switch {
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		big = true
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
	default:
		return data
	}
	data = data[2:]
	units := make([]uint16, len(data)/2)
	for i := range units {
		if big {
			units[i] = uint16(data[2*i])<<8 | uint16(data[2*i+1])
		} else {
			units[i] = uint16(data[2*i+1])<<8 | uint16(data[2*i])
		}
	}
	return []byte(string(utf16.Decode(units)))
}

// decodeUTF8 makes data text: without a byte order mark, with \n line
// ends, each byte that is not UTF-8 replaced by U+FFFD. It reports how
// many bytes were replaced and the line of the first.
func decodeUTF8(data []byte) (text string, invalid, firstLine int) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var b strings.Builder
	b.Grow(len(data))
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			if invalid == 0 {
				firstLine = line
			}
			invalid++
			b.WriteRune(utf8.RuneError)
		case r == '\r':
			// \r\n and a lone \r (old Mac files) are both one line end.
			b.WriteByte('\n')
			line++
			if i+1 < len(data) && data[i+1] == '\n' {
				size = 2
			}
		default:
			if r == '\n' {
				line++
			}
			b.Write(data[i : i+size])
		}
		i += size
	}
	return b.String(), invalid, firstLine
}

// indentedSize bounds from above what json.Indent makes of valid JSON
// with a two-space indent: each bracket and comma starts a line indented
// by its depth, each colon gains a space. It stops counting past limit.
func indentedSize(text string, limit int) int {
	n, depth := len(text), 0
	inString, escaped := false, false
	for i := 0; i < len(text) && n <= limit; i++ {
		c := text[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			n += 1 + 2*depth
		case '}', ']':
			depth = max(depth-1, 0)
			n += 1 + 2*depth
		case ',':
			n += 1 + 2*depth
		case ':':
			n++
		}
	}
	return n
}

// jsonErrorAt words a JSON syntax error with the line and column where
// the parser stopped.
func jsonErrorAt(text string, err error) string {
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		return err.Error()
	}
	off := min(int(syntax.Offset), len(text))
	before := text[:off]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:])
	if syntax.Offset > 0 && off == len(text) && strings.Contains(err.Error(), "unexpected end") {
		return fmt.Sprintf("it ends too early, at line %d, column %d", line, col)
	}
	return fmt.Sprintf("%s at line %d, column %d", err.Error(), line, col)
}

// markdownTitle is the first "# " heading outside code fences.
func markdownTitle(text string) string {
	fenced := false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		if !fenced && strings.HasPrefix(line, "# ") {
			return strings.TrimSpace(strings.Trim(strings.TrimSpace(line[2:]), "#"))
		}
	}
	return ""
}

// extractPDF joins a PDF's pages, a blank line between two, and records
// where each starts.
func extractPDF(ctx context.Context, name string, data []byte, maxInflated int) (Text, error) {
	doc, err := pdftext.ExtractWithin(ctx, data, pdftext.Limits{MaxInflated: int64(maxInflated)})
	var unreadable *pdftext.UnreadableError
	var over *pdftext.LimitError
	switch {
	case ctx.Err() != nil:
		return Text{}, ctx.Err()
	case errors.As(err, &over):
		return Text{}, &FileError{Filename: name, Kind: ErrKindInflated,
			Reason: fmt.Sprintf("is a PDF that inflates to more than knowledge.max_inflated_bytes allows (%s) as it is read: its streams, counted each time a page draws them, and its text", quote.Bytes(over.Limit))}
	case errors.Is(err, pdftext.ErrEncrypted):
		return Text{}, &FileError{Filename: name, Kind: ErrKindEncrypted,
			Reason: "is a password-protected PDF; save a copy without the password and upload that"}
	case errors.Is(err, pdftext.ErrNoText):
		return Text{}, &FileError{Filename: name, Kind: ErrKindEmpty, Reason: "is " + err.Error()}
	case errors.As(err, &unreadable):
		return Text{}, &FileError{Filename: name, Kind: ErrKindCorrupt, Reason: "is a broken PDF (" + unreadable.Reason + ")"}
	case err != nil:
		return Text{}, fmt.Errorf("reading the PDF %s: %w", name, err)
	}
	t := Text{Format: "pdf", Title: doc.Title, Pages: make([]int, len(doc.Pages))}
	var b strings.Builder
	for i, page := range doc.Pages {
		if i > 0 {
			b.WriteString("\n\n")
		}
		t.Pages[i] = b.Len()
		b.WriteString(strings.ToValidUTF8(page, "\uFFFD"))
	}
	t.Body = b.String()
	if blank(t.Body) {
		return Text{}, &FileError{Filename: name, Kind: ErrKindEmpty, Reason: "is " + pdftext.ErrNoText.Error()}
	}
	return t, nil
}

// blank reports whether s holds nothing to read: white space, and the
// invisible marks editors leave (a byte order mark inside the text,
// zero-width spaces and joiners).
func blank(s string) bool {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || r == '\uFEFF' || r == '\u200B' || r == '\u200C' || r == '\u200D' || r == '\u2060'
	}) == ""
}
