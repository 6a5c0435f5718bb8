package pdftext

import (
	"context"
	"crypto/sha256"
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
	// forms are keyed by their resources' text and their name there.
	forms map[string]*form
}

func newReading(ctx context.Context, lim Limits) *reading {
	return &reading{ctx: ctx, m: newMeter(ctx, lim), fonts: map[string]*font{}, cmaps: map[string]*cmap{}, forms: map[string]*form{}}
}

// page reads one page's text.
func (rd *reading) page(page pdf.Value) (string, error) {
	contents := page.Key("Contents")
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
	if err := rd.draw(next, inherited(page, "Resources"), nil, gstate{}, w, 0); err != nil {
		return "", err
	}
	if err := w.end(); err != nil {
		return "", err
	}
	return w.text(), nil
}

const (
	// maxFormDepth bounds forms drawn inside forms (a form may draw
	// itself); real files nest a few.
	maxFormDepth = 12
	// maxForms bounds the forms remembered per document.
	maxForms = 4096
	// formDrawCost is what drawing a form is charged to the budget on top
	// of its stream's bytes: a form of a few bytes that draws itself or
	// its siblings many times over would otherwise cost time the budget
	// never sees.
	formDrawCost = 4 << 10
)

// draw runs a content stream, a page's or a form's (8.10), whose
// resources are res, from the graphics state g (zero: the initial one),
// into w. depth counts the forms it is drawn inside.
func (rd *reading) draw(next func() io.Reader, res pdf.Value, owner *form, g gstate, w *pageWriter, depth int) error {
	fontDicts := res.Key("Font")
	fonts := map[string]*font{}
	in := &interp{lex: newLexer(&concatenated{next: next}), out: w, g: g}
	in.fonts = func(name string) (*font, error) {
		if f, ok := fonts[name]; ok {
			return f, nil
		}
		f, err := rd.font(fontDicts.Key(name))
		if err != nil {
			return nil, err
		}
		fonts[name] = f
		return f, nil
	}
	// resKey names res in rd.forms: a digest of the text of its
	// dictionary (which writes the objects it refers to by number), made
	// once per resources (a form's are kept with it) and charged to the
	// budget, since a hostile file's resources can be written out whole
	// at megabytes.
	resKey := ""
	if owner != nil {
		resKey = owner.resKey
	}
	in.form = func(name string) error {
		if depth >= maxFormDepth {
			return nil
		}
		if resKey == "" {
			text := res.String()
			if err := rd.m.charge(len(text)); err != nil {
				return err
			}
			sum := sha256.Sum256([]byte(text))
			resKey = string(sum[:])
			if owner != nil {
				owner.resKey = resKey
			}
		}
		x := rd.form(resKey, res, name)
		if x == nil {
			return nil // an image, or nothing
		}
		if err := rd.m.charge(formDrawCost); err != nil {
			return err
		}
		inner := in.g
		inner.ctm = x.matrix.times(in.g.ctm)
		// The font drawn with stays; its name is the form's resources' to
		// give, which may name another font the same.
		inner.fontName = ""
		drawn := false
		return rd.draw(func() io.Reader {
			if drawn {
				return nil
			}
			drawn = true
			return inflated{r: x.stream.Reader(), m: rd.m}
		}, x.resources, x, inner, w, depth+1)
	}
	return in.run()
}

// form is a form XObject, read once per document.
type form struct {
	stream, resources pdf.Value
	matrix            matrix
	// resKey names resources in rd.forms once worked out (draw).
	resKey string
}

// form is the form XObject that the resources res (whose text is
// resKey) name name, nil if it is none. The library reads an object
// from the file again each time it is looked up, which a form drawn
// thousands of times (a page's furniture, or a hostile form drawing
// itself) pays each time.
func (rd *reading) form(resKey string, res pdf.Value, name string) *form {
	key := resKey + name
	if x, ok := rd.forms[key]; ok {
		return x
	}
	var x *form
	if v := res.Key("XObject").Key(name); v.Kind() == pdf.Stream && v.Key("Subtype").Name() == "Form" {
		// A form's own resources, else (as PDF 1.1 wrote them) the
		// resources of what draws it.
		sub := v.Key("Resources")
		if sub.Kind() != pdf.Dict {
			sub = res
		}
		x = &form{stream: v, resources: sub, matrix: formMatrix(v.Key("Matrix"))}
	}
	// The lexer cuts names at maxNameBytes, so a key is small.
	if len(rd.forms) < maxForms {
		rd.forms[key] = x
	}
	return x
}

// formMatrix is a form's Matrix, mapping its space to the space it is
// drawn in; the identity where it has none or it is not six numbers.
func formMatrix(v pdf.Value) matrix {
	if v.Kind() != pdf.Array || v.Len() != 6 {
		return identity
	}
	var m matrix
	for i := range m {
		e := v.Index(i)
		if e.Kind() != pdf.Integer && e.Kind() != pdf.Real {
			return identity
		}
		m[i] = e.Float64()
	}
	return m
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
