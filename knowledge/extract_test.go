package knowledge

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"koe/internal/pdftext/pdftest"
)

func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestExtractFiles reads the files in testdata as an upload would bring
// them: the browser's mime is often wrong or generic.
func TestExtractFiles(t *testing.T) {
	tests := []struct {
		file, mime string
		format     string
		title      string
		pages      int
		has        []string // in Body
		hasNot     []string
		lines      []string // whole lines of Body
	}{
		{
			file: "handbook.pdf", mime: "application/octet-stream", format: "pdf", pages: 4,
			title: "Lantern Works Staff Handbook",
			has: []string{"Lantern Works builds small lamps for reading rooms and night trains.",
				"Wear the amber goggles whenever a soldering iron is hot.",
				"Salaries are paid on the twenty-fifth of each month.",
				"We hold a farewell tea for everyone who leaves, whatever the reason.",
				"first week", "officer"}, // ligatures spelled out
			hasNot: []string{"\uFB01", "\r"},
		},
		{
			// An owner password limits printing, not reading: anyone opens it.
			file: "owner-only.pdf", mime: "application/pdf", format: "pdf", pages: 4,
			title: "Lantern Works Staff Handbook",
			has:   []string{"The first-aid kit hangs beside the north door."},
		},
		{
			file: "rules.html", mime: "text/html", format: "html", title: "Channel Rules – Kitsune Radio",
			has: []string{"Moderators enforce them & may time you out without warning.",
				"Self-promotion is allowed on Fridays in the #showcase channel.",
				"Appeals:   write to appeals@example.org\n           within 30 days",
				"Welcome to the den!"},
			hasNot: []string{"TRACKING-PIXEL-42", "SCRIPT-BODY-TEXT", "MENU-ITEM", "font-family", "<", "&amp;", "&lsquo;"},
			lines: []string{"# Kitsune Radio: Channel Rules", "## Chat", "## Links & promotion", "### Emotes",
				"- Be kind: no insults, slurs or harassment.",
				"- No spoilers for games released in the last two weeks.",
				"- The ‘fox’ emote is for subscribers.",
				"Second A ten-minute timeout", "© 2026 Kitsune Radio"},
		},
		{
			// The name decides over a generic mime.
			file: "story.md", mime: "application/octet-stream", format: "markdown", title: "The Salt Lantern: Story Bible",
			lines: []string{"## Setting", "### Ila Marrow", "# not a heading: a comment in a code fence"},
			has:   []string{"He owes the Salt Guild a debt he never speaks of."},
		},
		{
			file: "config.json", mime: "", format: "json",
			lines: []string{`{`, `  "character": {`, `    "name": "Mira",`, `    "stores": [`, `      "memory",`,
				`  "greeting": "Hello, I am Mira \u2014 ask me anything."`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := Extract(context.Background(), tt.file, tt.mime, readTestdata(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tt.format || got.Title != tt.title || len(got.Pages) != tt.pages {
				t.Errorf("format %q title %q pages %d; want %q %q %d", got.Format, got.Title, len(got.Pages), tt.format, tt.title, tt.pages)
			}
			for _, s := range tt.has {
				if !strings.Contains(got.Body, s) {
					t.Errorf("body lacks %q", s)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(got.Body, s) {
					t.Errorf("body has %q", s)
				}
			}
			lines := strings.Split(got.Body, "\n")
			for _, want := range tt.lines {
				if !containsLine(lines, want) {
					t.Errorf("no line %q in\n%s", want, got.Body)
				}
			}
			if !utf8.ValidString(got.Body) {
				t.Error("the body is not UTF-8")
			}
		})
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// A PDF's pages are where their text is: PageAt finds each page's
// sentences on it.
func TestExtractPDFPages(t *testing.T) {
	got, err := Extract(context.Background(), "handbook.pdf", "", readTestdata(t, "handbook.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Pages[0] != 0 {
		t.Fatalf("pages %v", got.Pages)
	}
	for text, page := range map[string]int{
		"Lantern Works builds small lamps": 1,
		"Night shifts exist only":          1,
		"Wear the amber goggles":           2,
		"Fire drills happen":               2,
		"Salaries are paid":                3,
		"meal allowance abroad":            3,
		"Give four weeks of notice":        4,
	} {
		off := strings.Index(got.Body, text)
		if off < 0 || got.PageAt(off) != page {
			t.Errorf("%q at %d is on page %d, want %d", text, off, got.PageAt(off), page)
		}
	}
}

func TestExtractRefusals(t *testing.T) {
	pdfOK := readTestdata(t, "handbook.pdf")
	tests := []struct {
		name, mime string
		data       []byte
		kind       FileErrorKind
		reason     string
	}{
		{"empty.txt", "text/plain", readTestdata(t, "empty.txt"), ErrKindEmpty, "is empty"},
		{"blank.md", "", []byte(" \r\n\t\n\ufeff"), ErrKindEmpty, "holds only white space"},
		{"bom.txt", "", []byte("\xef\xbb\xbf\r\n"), ErrKindEmpty, "holds only white space"},
		{"scan.pdf", "application/pdf", pdftest.Build("", pdftest.Page{Content: "0 0 m 100 100 l S"}), ErrKindEmpty,
			"is a PDF without text to extract (scanned pages are images)"},
		{"menu.html", "", []byte("<html><head><title>Menu</title><script>var x = 1</script></head><body><nav>Home | About</nav></body></html>"),
			ErrKindEmpty, "is an HTML page without text to read (outside its scripts, styles and menus)"},
		{"image.png", "application/octet-stream", readTestdata(t, "image.png"), ErrKindType,
			"is an image (image/png); koe reads text, Markdown, HTML, PDF, JSON and source code"},
		// The bytes decide, not the name.
		{"notes.txt", "text/plain", readTestdata(t, "image.png"), ErrKindType,
			"is an image (image/png); koe reads text, Markdown, HTML, PDF, JSON and source code"},
		{"photo.pdf", "application/pdf", readTestdata(t, "image.png"), ErrKindType,
			"is named a PDF but is an image (image/png); koe reads text, Markdown, HTML, PDF, JSON and source code"},
		{"archive.zip", "", []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00"), ErrKindType,
			"is an archive (application/zip); koe reads text, Markdown, HTML, PDF, JSON and source code"},
		{"data.bin", "", []byte("\x01\x02\x00\x03 some bytes"), ErrKindType,
			"is a binary file (application/octet-stream); koe reads text, Markdown, HTML, PDF, JSON and source code"},
		{"broken.pdf", "application/pdf", readTestdata(t, "broken.pdf"), ErrKindCorrupt,
			"is a broken PDF (not a PDF file: missing %%EOF)"},
		{"report.pdf", "application/pdf", []byte("just some text named like a PDF"), ErrKindCorrupt,
			"is not a PDF: it does not start with %PDF-, as every PDF does"},
		{"encrypted.pdf", "application/pdf", readTestdata(t, "encrypted.pdf"), ErrKindEncrypted,
			"is a password-protected PDF; save a copy without the password and upload that"},
		{"encrypted-rc4.pdf", "", readTestdata(t, "encrypted-rc4.pdf"), ErrKindEncrypted,
			"is a password-protected PDF; save a copy without the password and upload that"},
		{"bad.json", "application/json", []byte("{\n  \"a\": 1,\n  }\n"), ErrKindCorrupt,
			"is not valid JSON: invalid character '}' looking for beginning of object key string at line 3, column 3"},
		{"cut.json", "", []byte(`{"a": [1, 2`), ErrKindCorrupt, "is not valid JSON: it ends too early, at line 1, column 11"},
		// Latin-1 is not UTF-8: too many bytes to replace quietly.
		{"latin1.txt", "text/plain", []byte("line one\ncaf\xe9 cr\xe8me br\xfbl\xe9e, \xe0 la carte, na\xefve fa\xe7ade, d\xe9j\xe0 vu\n"), ErrKindCorrupt,
			"is not UTF-8 text (9 bytes are not UTF-8, the first on line 2); save it as UTF-8 and upload it again"},
		{"pdf-mime.txt", "application/pdf", []byte("plain words"), ErrKindCorrupt,
			"is not a PDF: it does not start with %PDF-, as every PDF does"},
	}
	_ = pdfOK
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Extract(context.Background(), tt.name, tt.mime, tt.data)
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("got %+v, %v; want a refusal", got, err)
			}
			if fe.Kind != tt.kind || fe.Reason != tt.reason || fe.Filename != tt.name {
				t.Fatalf("got %q %q %q\nwant %q %q", fe.Filename, fe.Kind, fe.Reason, tt.kind, tt.reason)
			}
			if got.Body != "" || got.Pages != nil {
				t.Fatalf("text with a refusal: %+v", got)
			}
		})
	}
}

func TestExtractTestdataPNGIsReal(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(readTestdata(t, "image.png")))
	if err != nil || img.Bounds().Dx() != 2 {
		t.Fatalf("%v %v", img, err)
	}
}

func TestExtractText(t *testing.T) {
	tests := []struct {
		name, mime string
		data       string
		format     string
		body       string
		title      string
	}{
		// The BOM goes, CRLF and a lone CR become \n.
		{"notes.txt", "", "\xef\xbb\xbfone\r\ntwo\rthree\n", "text", "one\ntwo\nthree\n", ""},
		// A few stray bytes are shown as U+FFFD, not refused.
		{"cut.txt", "", "almost all UTF-8 \xe6\x97", "text", "almost all UTF-8 \uFFFD\uFFFD", ""},
		// UTF-16 with its byte order mark, as Windows saves "Unicode" text.
		{"utf16.txt", "", "\xff\xfeh\x00i\x00 \x00\xe9\x00", "text", "hi é", ""},
		{"utf16be.md", "", "\xfe\xff\x00#\x00 \x00T\x00\n\x00x", "markdown", "# T\nx", "T"},
		{"main.go", "text/x-go", "package main\n\n// # not a heading\nfunc main() {}\n", "code", "package main\n\n// # not a heading\nfunc main() {}\n", ""},
		{"Makefile", "", "all:\n\tgo build\n", "code", "all:\n\tgo build\n", ""},
		{"deploy.yml", "application/octet-stream", "on: push\n", "code", "on: push\n", ""},
		// Without a known extension the mime, then the bytes, decide.
		{"upload", "application/json", `[1,2]`, "json", "[\n  1,\n  2\n]", ""},
		{"upload", "text/markdown", "intro\n\n# Real title\n", "markdown", "intro\n\n# Real title\n", "Real title"},
		{"upload", "application/octet-stream", "<!DOCTYPE html><title>T</title><p>Hi &lt;there&gt;</p>", "html", "Hi <there>", "T"},
		{"upload", "", "just words", "text", "just words", ""},
		// A Markdown title skips a fenced comment.
		{"a.md", "", "```\n# comment\n```\n## Sub\n# Title #\n", "markdown", "```\n# comment\n```\n## Sub\n# Title #\n", "Title"},
		// HTML: no <title>, so the first h1; blocks, breaks and entities.
		{"p.htm", "", "<body><h2>Intro</h2><h1>Main &amp; more</h1><div>a<br>b</div><p>x&nbsp;y   z</p></body>", "html",
			"## Intro\n\n# Main & more\n\na\nb\n\nx y z", "Main & more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Extract(context.Background(), tt.name, tt.mime, []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tt.format || got.Body != tt.body || got.Title != tt.title || got.Pages != nil {
				t.Fatalf("got %q %q %q %v\nwant %q %q %q", got.Format, got.Body, got.Title, got.Pages, tt.format, tt.body, tt.title)
			}
		})
	}
}

func TestExtractHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Extract(ctx, "handbook.pdf", "", readTestdata(t, "handbook.pdf"))
	if !errors.Is(err, context.Canceled) || IsFileError(err) {
		t.Fatalf("got %v", err)
	}
}

// FuzzExtract: any bytes under any name give text or a refusal, never a
// panic or an unexplained error, and text is UTF-8 that is not blank.
func FuzzExtract(f *testing.F) {
	for _, name := range []string{"handbook.pdf", "rules.html", "story.md", "config.json", "image.png", "broken.pdf"} {
		f.Add(name, "", readTestdata(f, name))
	}
	f.Add("a.txt", "text/plain", []byte("caf\xe9\r\n"))
	f.Add("x.json", "application/json", []byte(`{"a":`))
	f.Add("p.html", "", []byte("<pre><nav><script>"))
	f.Fuzz(func(t *testing.T, name, mime string, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		got, err := Extract(context.Background(), name, mime, data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || fe.Reason == "" || fe.Kind == "" {
				t.Fatalf("error %#v", err)
			}
			return
		}
		if strings.TrimSpace(got.Body) == "" || !utf8.ValidString(got.Body) || got.Format == "" {
			t.Fatalf("text %+v", got)
		}
		for i, p := range got.Pages {
			if p < 0 || p > len(got.Body) || i > 0 && p < got.Pages[i-1] {
				t.Fatalf("pages %v of %d bytes", got.Pages, len(got.Body))
			}
		}
	})
}
