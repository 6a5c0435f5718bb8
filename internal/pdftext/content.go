package pdftext

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// A page's text is read from its content stream by koe's own interpreter
// of the text operators (PDF 32000-1, 9.4), streaming: what it holds is the
// graphics state, the operands of one operator and the page's text so
// far. The library's interpreter keeps every glyph of a page (about a
// hundred bytes each) and reads the font's widths from the file again for
// each, which made a few megabytes of instructions cost minutes and
// gigabytes.

// operand is one value an operator takes.
type operand struct {
	kind tokKind // tokNumber, tokString, tokName, tokKeyword, tokArrayOpen (an array), tokDictOpen (a dictionary, not kept)
	num  float64
	str  string
	arr  []operand // an array's numbers and strings
}

const (
	// maxOperands bounds the operands kept for the next operator; extra
	// ones (none takes more than six but arrays) push out the oldest.
	maxOperands = 64
	// maxOperandBytes bounds what the operands of one operator hold.
	maxOperandBytes = 4 << 20
	// maxNesting bounds arrays and dictionaries inside each other.
	maxNesting = 32
	// maxSaves bounds the graphics states q saves; deeper saves are
	// counted, not kept (real files nest a few).
	maxSaves = 256
)

var (
	errOperandsTooLarge = fmt.Errorf("a drawing instruction with more than %d MiB of operands", maxOperandBytes>>20)
	errTooDeep          = fmt.Errorf("arrays or dictionaries nested deeper than %d", maxNesting)
)

// readArray reads an array's elements after its '['; nested arrays are
// read, dictionaries skipped. budget bounds the elements and string bytes
// it may hold.
func readArray(l *lexer, depth, budget int) (operand, error) {
	if depth >= maxNesting {
		return operand{}, errTooDeep
	}
	arr := operand{kind: tokArrayOpen}
	for {
		tok, err := l.next()
		if err != nil {
			return operand{}, err
		}
		var elem operand
		switch tok.kind {
		case tokEnd, tokArrayClose:
			return arr, nil
		case tokNumber:
			elem = operand{kind: tokNumber, num: tok.num}
		case tokString, tokName:
			elem = operand{kind: tok.kind, str: string(tok.text)}
		case tokArrayOpen:
			if elem, err = readArray(l, depth+1, budget); err != nil {
				return operand{}, err
			}
		case tokDictOpen:
			if err := skipDict(l, depth+1); err != nil {
				return operand{}, err
			}
			elem = operand{kind: tokDictOpen}
		default:
			continue
		}
		if budget -= elem.size(); budget < 0 {
			return operand{}, errOperandsTooLarge
		}
		arr.arr = append(arr.arr, elem)
	}
}

// skipDict passes over a dictionary after its "<<": a marked-content
// property list or an inline image's parameters, which hold no text.
func skipDict(l *lexer, depth int) error {
	if depth >= maxNesting {
		return errTooDeep
	}
	for {
		tok, err := l.next()
		if err != nil {
			return err
		}
		switch tok.kind {
		case tokEnd, tokDictClose:
			return nil
		case tokDictOpen:
			if err := skipDict(l, depth+1); err != nil {
				return err
			}
		case tokArrayOpen:
			if _, err := readArray(l, depth+1, maxOperandBytes); err != nil {
				return err
			}
		}
	}
}

// size is what an operand weighs against maxOperandBytes.
func (o operand) size() int {
	n := 16 + len(o.str)
	for _, e := range o.arr {
		n += e.size()
	}
	return n
}

// matrix is [a b c d e f], standing for the 3×3 matrix whose columns
// are (a c e), (b d f), (0 0 1), as PDF writes transformations.
type matrix [6]float64

var identity = matrix{1, 0, 0, 1, 0, 0}

// times is m applied first, then n.
func (m matrix) times(n matrix) matrix {
	return matrix{
		m[0]*n[0] + m[1]*n[2], m[0]*n[1] + m[1]*n[3],
		m[2]*n[0] + m[3]*n[2], m[2]*n[1] + m[3]*n[3],
		m[4]*n[0] + m[5]*n[2] + n[4], m[4]*n[1] + m[5]*n[3] + n[5],
	}
}

// translated is m moved by (tx, ty) in its own space: [1 0 0 1 tx ty] × m.
func (m matrix) translated(tx, ty float64) matrix {
	m[4] += tx*m[0] + ty*m[2]
	m[5] += tx*m[1] + ty*m[3]
	return m
}

// gstate is the part of the graphics state text needs (8.4, 9.3).
type gstate struct {
	ctm                         matrix
	charSpace, wordSpace, scale float64
	leading, fontSize, rise     float64
	font                        *font
	fontName                    string
}

// interp runs one page's content stream.
type interp struct {
	lex   *lexer
	fonts func(name string) (*font, error)
	// form draws the form XObject name (Do); nil: forms are not drawn.
	form func(name string) error
	out  *pageWriter

	g        gstate
	saved    []gstate
	overflow int // saves past maxSaves
	tm, tlm  matrix

	args      []operand
	argsBytes int
}

// run reads the stream to its end, from the graphics state in.g or,
// where it is zero, the initial one.
func (in *interp) run() error {
	if in.g.font == nil {
		in.g = gstate{ctm: identity, scale: 1, font: noFont}
	}
	in.tm, in.tlm = identity, identity
	for {
		tok, err := in.lex.next()
		if err != nil {
			return err
		}
		var arg operand
		switch tok.kind {
		case tokEnd:
			return nil
		case tokNumber:
			arg = operand{kind: tokNumber, num: tok.num}
		case tokString, tokName:
			arg = operand{kind: tok.kind, str: string(tok.text)}
		case tokArrayOpen:
			if arg, err = readArray(in.lex, 1, maxOperandBytes-in.argsBytes); err != nil {
				return err
			}
		case tokDictOpen:
			if err := skipDict(in.lex, 1); err != nil {
				return err
			}
			arg = operand{kind: tokDictOpen}
		case tokKeyword:
			switch op := string(tok.text); op {
			case "true", "false", "null":
				arg = operand{kind: tokKeyword, str: op}
			default:
				err := in.do(op)
				in.args, in.argsBytes = in.args[:0], 0
				if err != nil {
					return err
				}
				continue
			}
		default:
			continue
		}
		if in.argsBytes += arg.size(); in.argsBytes > maxOperandBytes {
			return errOperandsTooLarge
		}
		if len(in.args) == maxOperands {
			in.argsBytes -= in.args[0].size()
			in.args = append(in.args[:0], in.args[1:]...)
		}
		in.args = append(in.args, arg)
	}
}

// nums reads the last n operands as numbers; ok is false when there are
// fewer or one is not a number.
func (in *interp) nums(n int) ([]float64, bool) {
	if len(in.args) < n {
		return nil, false
	}
	out := make([]float64, n)
	for i, a := range in.args[len(in.args)-n:] {
		if a.kind != tokNumber || math.IsNaN(a.num) {
			return nil, false
		}
		out[i] = a.num
	}
	return out, true
}

// last is the last operand, if it is of kind.
func (in *interp) last(kind tokKind) (operand, bool) {
	if len(in.args) == 0 || in.args[len(in.args)-1].kind != kind {
		return operand{}, false
	}
	return in.args[len(in.args)-1], true
}

// do runs one operator. Operators with operands that are not what they
// should be are passed over, as readers do.
func (in *interp) do(op string) error {
	g := &in.g
	switch op {
	case "q":
		if len(in.saved) >= maxSaves {
			in.overflow++
			return nil
		}
		in.saved = append(in.saved, *g)
	case "Q":
		switch {
		case in.overflow > 0:
			in.overflow--
		case len(in.saved) > 0:
			*g = in.saved[len(in.saved)-1]
			in.saved = in.saved[:len(in.saved)-1]
		}
	case "cm":
		if v, ok := in.nums(6); ok {
			g.ctm = matrix(v).times(g.ctm)
		}
	case "BT":
		in.tm, in.tlm = identity, identity
	case "Tc":
		if v, ok := in.nums(1); ok {
			g.charSpace = v[0]
		}
	case "Tw":
		if v, ok := in.nums(1); ok {
			g.wordSpace = v[0]
		}
	case "Tz":
		if v, ok := in.nums(1); ok {
			g.scale = v[0] / 100
		}
	case "TL":
		if v, ok := in.nums(1); ok {
			g.leading = v[0]
		}
	case "Ts":
		if v, ok := in.nums(1); ok {
			g.rise = v[0]
		}
	case "Tf":
		return in.selectFont()
	case "Td":
		if v, ok := in.nums(2); ok {
			in.moveLine(v[0], v[1])
		}
	case "TD":
		if v, ok := in.nums(2); ok {
			g.leading = -v[1]
			in.moveLine(v[0], v[1])
		}
	case "Tm":
		if v, ok := in.nums(6); ok {
			in.tm, in.tlm = matrix(v), matrix(v)
		}
	case "T*":
		in.moveLine(0, -g.leading)
	case "Tj":
		if s, ok := in.last(tokString); ok {
			return in.show(s.str)
		}
	case "'":
		if s, ok := in.last(tokString); ok {
			in.moveLine(0, -g.leading)
			return in.show(s.str)
		}
	case "\"":
		if s, ok := in.last(tokString); ok && len(in.args) >= 3 {
			in.args = in.args[:len(in.args)-1]
			if v, ok := in.nums(2); ok {
				g.wordSpace, g.charSpace = v[0], v[1]
			}
			in.moveLine(0, -g.leading)
			return in.show(s.str)
		}
	case "TJ":
		if a, ok := in.last(tokArrayOpen); ok {
			return in.showArray(a.arr)
		}
	case "ID":
		in.lex.skipInlineImage()
	case "Do":
		if x, ok := in.last(tokName); ok && in.form != nil {
			return in.form(x.str)
		}
	}
	return nil
}

func (in *interp) moveLine(tx, ty float64) {
	in.tlm = in.tlm.translated(tx, ty)
	in.tm = in.tlm
}

func (in *interp) selectFont() error {
	if len(in.args) < 2 || in.args[len(in.args)-2].kind != tokName {
		return nil
	}
	v, ok := in.nums(1)
	if !ok {
		return nil
	}
	name := in.args[len(in.args)-2].str
	in.g.fontSize = v[0]
	if name == in.g.fontName {
		return nil
	}
	f, err := in.fonts(name)
	if err != nil {
		return err
	}
	in.g.font, in.g.fontName = f, name
	return nil
}

// showArray runs TJ: strings shown, numbers moving the next glyph back by
// thousandths of the font size.
func (in *interp) showArray(arr []operand) error {
	g := &in.g
	for _, e := range arr {
		switch e.kind {
		case tokString:
			if err := in.show(e.str); err != nil {
				return err
			}
		case tokNumber:
			in.tm = in.tm.translated(-e.num/1000*g.fontSize*g.scale, 0)
		}
	}
	return nil
}

// show places the glyphs of s (9.4.4) and writes their text. A glyph's
// rendering matrix is [size×scale 0 0 size 0 rise] × Tm × CTM; Tm moves
// along its own x axis from glyph to glyph, and so does Tm × CTM, so the
// directions and sizes in page space are the same for all of s.
func (in *interp) show(s string) error {
	g := &in.g
	f := g.font
	placed := in.tm.times(g.ctm)
	along, across := length(placed[0], placed[1]), length(placed[2], placed[3])
	// The baseline runs along Tm × CTM's x axis, backwards where the
	// font size or the horizontal scaling is negative.
	ux, uy := 1.0, 0.0
	if along > 0 {
		ux, uy = placed[0]/along, placed[1]/along
		if g.fontSize*g.scale < 0 {
			ux, uy = -ux, -uy
		}
	}
	em := math.Abs(g.fontSize) * across
	if em == 0 {
		em = math.Abs(g.fontSize*g.scale) * along
	}
	in.out.startRun(glyphRun{ux: ux, uy: uy, em: em, space: math.Abs(f.space/1000*g.fontSize*g.scale) * along})
	moved := 0.0
	for len(s) > 0 {
		code, n := f.code(s)
		s = s[n:]
		// The glyph ends at its width. The character spacing after it is
		// part of the gap to the next: Ghostscript spaces a run of
		// one-letter words ("r a s") with it, as Tc 3 at 10 points,
		// and letter-spaced text is told by its letter gaps all alike.
		w := f.width(code) / 1000 * g.fontSize
		t := glyph{
			x: g.rise*placed[2] + placed[4], y: g.rise*placed[3] + placed[5],
			dx: w * g.scale * placed[0], dy: w * g.scale * placed[1],
			text: f.text(code, n),
		}
		if err := in.out.glyph(&t); err != nil {
			return err
		}
		tx := w + g.charSpace
		if n == 1 && code == ' ' {
			tx += g.wordSpace
		}
		placed = placed.translated(tx*g.scale, 0)
		moved += tx * g.scale
	}
	// Tm moves once by what its glyphs moved it, as it moved placed.
	in.tm = in.tm.translated(moved, 0)
	return nil
}

// length is the length of the vector (a, b). Hypot, which avoids
// overflow where the squares would, costs the more for it; a matrix
// that big places nothing readable anyway.
func length(a, b float64) float64 {
	switch {
	case b == 0:
		return math.Abs(a)
	case a == 0:
		return math.Abs(b)
	}
	return math.Sqrt(a*a + b*b)
}

// concatenated reads a page's content streams one after the other, as
// one stream (7.8.2): next opens the next one (nil: there is none). A
// line end separates two, as a token never runs from one into the next.
type concatenated struct {
	next func() io.Reader
	cur  io.Reader
	sep  bool
}

func (c *concatenated) Read(p []byte) (int, error) {
	for range 100 {
		if c.sep && len(p) > 0 {
			c.sep = false
			p[0] = '\n'
			return 1, nil
		}
		if c.cur == nil {
			if c.cur = c.next(); c.cur == nil {
				return 0, io.EOF
			}
		}
		n, err := c.cur.Read(p)
		if errors.Is(err, io.EOF) {
			c.cur, c.sep, err = nil, true, nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
	return 0, io.ErrNoProgress
}
