package knowledge

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// htmlSkipped are elements whose text is not the page's: code, styles,
// menus, the head (whose title is read on its own).
var htmlSkipped = map[string]bool{
	"script": true, "style": true, "nav": true, "head": true, "noscript": true,
	"template": true, "svg": true, "iframe": true, "object": true, "canvas": true,
}

// htmlBlocks are elements that stand as paragraphs of their own.
var htmlBlocks = map[string]bool{
	"p": true, "div": true, "section": true, "article": true, "main": true, "header": true,
	"footer": true, "aside": true, "blockquote": true, "pre": true, "table": true, "ul": true,
	"ol": true, "dl": true, "figure": true, "figcaption": true, "form": true, "fieldset": true,
	"address": true, "details": true, "summary": true, "caption": true, "hr": true, "body": true,
	"h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
}

// htmlLines are elements that start a line of their own inside a block.
var htmlLines = map[string]bool{"li": true, "tr": true, "dt": true, "dd": true, "br": true}

// htmlText is a page's readable text and title: blocks become paragraphs
// separated by blank lines, h1–h6 "#" lines, list items "- " lines; white
// space collapses except in <pre>; entities are decoded. The title is the
// <title>, else the first h1. It walks tokens, not a tree, so that a deep
// or broken page costs no more than a flat one.
func htmlText(page string) (body, title string) {
	z := html.NewTokenizer(strings.NewReader(page))
	w := &textWriter{}
	skip := map[string]int{} // open skipped elements by name
	skipping := 0
	var titleText, h1Text strings.Builder
	inTitle, pre := false, 0
	heading := "" // the open h1–h6, if any
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		nameBytes, _ := z.TagName()
		name := string(nameBytes)
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			if name == "title" && tt == html.StartTagToken {
				inTitle = true
				continue
			}
			if htmlSkipped[name] {
				if tt == html.StartTagToken {
					skip[name]++
					skipping++
				}
				continue
			}
			if skipping > 0 {
				continue
			}
			switch {
			case len(name) == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6':
				w.paragraph()
				heading = name
				w.raw(strings.Repeat("#", int(name[1]-'0')) + " ")
			case name == "li":
				w.line()
				w.raw("- ")
			case name == "td" || name == "th":
				w.space()
			case htmlLines[name]:
				w.line()
			case htmlBlocks[name]:
				w.paragraph()
			}
			if name == "pre" && tt == html.StartTagToken {
				pre++
			}
		case html.EndTagToken:
			if name == "title" {
				inTitle = false
				continue
			}
			if htmlSkipped[name] {
				if skip[name] > 0 {
					skip[name]--
					skipping--
				}
				continue
			}
			if skipping > 0 {
				continue
			}
			if name == heading {
				heading = ""
				w.paragraph()
				continue
			}
			if name == "pre" && pre > 0 {
				pre--
			}
			if htmlBlocks[name] {
				w.paragraph()
			} else if htmlLines[name] {
				w.line()
			}
		case html.TextToken:
			text := string(z.Text()) // entities decoded
			if inTitle {
				titleText.WriteString(text)
				continue
			}
			if skipping > 0 {
				continue
			}
			if heading == "h1" {
				h1Text.WriteString(text)
			}
			if pre > 0 && heading == "" {
				w.preformatted(text)
			} else {
				w.text(text)
			}
		}
	}
	title = strings.Join(strings.Fields(titleText.String()), " ")
	if title == "" {
		title = strings.Join(strings.Fields(h1Text.String()), " ")
	}
	return w.String(), title
}

// textWriter writes collapsed text with the breaks asked for between
// runs: a break asked for twice counts once, and none leads the text.
type textWriter struct {
	b       strings.Builder
	pending int  // 0: none, 1: a line break, 2: a blank line
	spaced  bool // white space seen since the last word
	start   bool // at the start of a line, where a space is dropped
}

func (w *textWriter) paragraph() { w.pending = 2 }
func (w *textWriter) line()      { w.pending = max(w.pending, 1) }
func (w *textWriter) space()     { w.spaced = true }

// flush writes the break or space owed before more text.
func (w *textWriter) flush() {
	if w.b.Len() == 0 {
		w.pending, w.spaced, w.start = 0, false, true
		return
	}
	switch w.pending {
	case 2:
		w.b.WriteString("\n\n")
		w.start = true
	case 1:
		w.b.WriteString("\n")
		w.start = true
	default:
		if w.spaced && !w.start {
			w.b.WriteByte(' ')
		}
	}
	w.pending, w.spaced = 0, false
}

// raw writes markup of koe's own ("# ", "- ").
func (w *textWriter) raw(s string) {
	w.flush()
	w.b.WriteString(s)
	w.start = true
}

func (w *textWriter) text(s string) {
	for i, word := range strings.FieldsFunc(s, unicode.IsSpace) {
		if first, _ := utf8.DecodeRuneInString(s); i > 0 || unicode.IsSpace(first) {
			w.spaced = true
		}
		w.flush()
		w.b.WriteString(word)
		w.start = false
	}
	if last, _ := utf8.DecodeLastRuneInString(s); unicode.IsSpace(last) {
		w.spaced = true
	}
}

func (w *textWriter) preformatted(s string) {
	s = strings.TrimLeft(s, "\n")
	if s == "" {
		return
	}
	w.flush()
	w.b.WriteString(s)
	w.start = strings.HasSuffix(s, "\n")
}

func (w *textWriter) String() string { return strings.TrimSpace(w.b.String()) }
