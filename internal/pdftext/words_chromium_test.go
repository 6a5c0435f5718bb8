package pdftext

import (
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"koe/testkit/cdp"
)

// chromiumLines are the known text and the styles it is printed in, one
// line each: Chromium (Skia) writes a line as runs of glyphs, each run
// moved to by Td where a glyph is not where the previous one's width puts
// it (kerning, letter-spacing, justification), the spaces as glyphs.
var chromiumLines = []struct{ style, text string }{
	{"font: 16px serif", "Which telescope does the Kumo Dome observatory use?"},
	{"font: bold 30px sans-serif", "The Kumo Dome Observatory"},
	{"font: 13px monospace", "Kumo Dome telescope log, 1998."},
	{"font: italic 12px serif", "The Kumo Dome bought its Wavefront AVAT telescope in 1998."},
	{"font: 16px serif; letter-spacing: 0.3em", "Tracked Kumo Dome text"},
	{"font: 14px sans-serif; letter-spacing: 0.12em", "Lightly tracked Kumo Dome heading"},
	{"font: 14px sans-serif; letter-spacing: -0.04em", "Tightly tracked Kumo Dome caption"},
	{"font: 14px serif; word-spacing: 0.6em", "Word spaced Kumo Dome line"},
	{"font: 14px serif; width: 700px; text-align: justify; text-align-last: justify", "Justified: Kumo Dome Wavefront telescope, bought 1998."},
	{"font: 14px sans-serif; font-stretch: condensed", "Condensed Kumo Dome Typography: LT To Ye Wavy"},
	{"font: 7px serif", "Small print: the Kumo Dome office and its fjord."},
	{"font: 16px serif; transform: rotate(-12deg); transform-origin: left", "Rotated Kumo Dome stamp"},
	{"font: 16px serif; transform: scaleX(0.6); transform-origin: left", "Squeezed Kumo Dome banner"},
}

// TestWordsFromChromium prints a page of known text with headless
// Chromium and reads every word whole and separated, each line on its
// own.
func TestWordsFromChromium(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{})
	var page strings.Builder
	page.WriteString("<!doctype html><meta charset=utf-8><body style='margin: 0'>")
	var want []string
	for _, l := range chromiumLines {
		fmt.Fprintf(&page, "<p style='white-space: nowrap; margin: 0 0 28px; %s'>%s</p>\n", l.style, html.EscapeString(l.text))
		want = append(want, l.text)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page.String())
	}))
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
	defer cancel()
	p, err := browser.NewPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Navigate(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, `document.fonts.status === "loaded"`); err != nil {
		t.Fatal(err)
	}
	var printed struct {
		Data string `json:"data"`
	}
	if err := p.Call(ctx, "Page.printToPDF", map[string]any{"marginTop": 0.4, "marginLeft": 0.4}, &printed); err != nil {
		t.Fatal(err)
	}
	data, err := base64.StdEncoding.DecodeString(printed.Data)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Extract(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Pages) != 1 {
		t.Fatalf("%d pages", len(doc.Pages))
	}
	got := strings.Split(doc.Pages[0], "\n")
	for i, line := range want {
		if i >= len(got) {
			t.Errorf("line %d (%s) missing", i+1, chromiumLines[i].style)
		} else if got[i] != line {
			t.Errorf("line %d (%s): got %q, want %q", i+1, chromiumLines[i].style, got[i], line)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d lines, want %d:\n%s", len(got), len(want), doc.Pages[0])
	}
}
