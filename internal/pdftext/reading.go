package pdftext

import (
	"context"
	"errors"
	"io"

	"github.com/ledongthuc/pdf"
)

// reading is one document's extraction: its meter, and the fonts and
// character maps read once for all its pages.
type reading struct {
	ctx context.Context
	m   *meter
	// fonts are keyed by the font dictionary's text, cmaps by the
	// stream's (its dictionary and its offset in the file).
	fonts map[string]*font
	cmaps map[string]*cmap
}

func newReading(ctx context.Context, lim Limits) *reading {
	return &reading{ctx: ctx, m: newMeter(ctx, lim), fonts: map[string]*font{}, cmaps: map[string]*cmap{}}
}

// page reads one page's text.
func (rd *reading) page(page pdf.Value) (string, error) {
	contents := page.Key("Contents")
	fontDicts := inherited(page, "Resources").Key("Font")
	pageFonts := map[string]*font{}
	fonts := func(name string) (*font, error) {
		if f, ok := pageFonts[name]; ok {
			return f, nil
		}
		f, err := rd.font(fontDicts.Key(name))
		if err != nil {
			return nil, err
		}
		pageFonts[name] = f
		return f, nil
	}
	i := 0
	next := func() io.Reader {
		for {
			var s pdf.Value
			switch {
			case contents.Kind() == pdf.Stream && i == 0:
				s = contents
			case contents.Kind() == pdf.Array && i < contents.Len():
				s = contents.Index(i)
			default:
				return nil
			}
			i++
			if s.Kind() == pdf.Stream {
				return inflated{r: s.Reader(), m: rd.m}
			}
		}
	}
	w := &pageWriter{m: rd.m}
	in := &interp{lex: newLexer(&concatenated{next: next}), fonts: fonts, out: w}
	if err := in.run(); err != nil {
		return "", err
	}
	return w.text(), nil
}

// font reads a font dictionary once per document.
func (rd *reading) font(v pdf.Value) (*font, error) {
	if v.Kind() != pdf.Dict {
		return noFont, nil
	}
	key := v.String()
	if f, ok := rd.fonts[key]; ok {
		return f, nil
	}
	f, err := loadFont(v, rd.cmap)
	if err != nil {
		return nil, err
	}
	rd.fonts[key] = f
	return f, nil
}

// cmap reads a ToUnicode stream once per document. A map that does not
// read (a broken stream) is none: the font's text then comes from its
// encoding. Running out of budget or time is not passed over.
func (rd *reading) cmap(v pdf.Value) (*cmap, error) {
	key := v.String()
	if m, ok := rd.cmaps[key]; ok {
		return m, nil
	}
	m, err := parseCMap(inflated{r: v.Reader(), m: rd.m})
	var limit *LimitError
	switch {
	case rd.ctx.Err() != nil:
		return nil, rd.ctx.Err()
	case errors.As(err, &limit):
		return nil, err
	case err != nil:
		m = nil
	}
	rd.cmaps[key] = m
	return m, nil
}

// inherited is a page attribute that may be set on the page or on any
// node above it (7.7.3.4). The walk up is bounded: a Parent that leads
// back down would make the library's own lookup loop forever.
func inherited(page pdf.Value, key string) pdf.Value {
	node := page
	for range maxPageTreeDepth {
		if v := node.Key(key); !v.IsNull() {
			return v
		}
		if node = node.Key("Parent"); node.IsNull() {
			break
		}
	}
	return pdf.Value{}
}
