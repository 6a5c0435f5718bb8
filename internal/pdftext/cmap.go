package pdftext

import (
	"io"
	"unicode/utf16"
)

// cmap is a font's ToUnicode character map (PDF 32000-1, 9.10.3): how its
// codes split (the codespace ranges) and the text each code stands for.
// It is read once per document and looked up per glyph in constant time:
// a map read by scanning its entries for each glyph costs entries times
// glyphs.
type cmap struct {
	// spaces holds the codespace ranges by code length, 1 to 4 bytes.
	spaces [4][]codeRange
	text   map[cmapCode]string
	// mapped counts the mappings read, the same code's again included.
	mapped int
}

type codeRange struct{ lo, hi uint32 }

type cmapCode struct {
	code uint32
	n    uint8 // bytes
}

const (
	// maxCMapCodes bounds the mappings one map is read for, ranges
	// counted code by code: a font has at most 65,536 glyphs, and the
	// same code may be mapped again. Mappings past it are ignored.
	maxCMapCodes = 1 << 18
	// maxCMapTextBytes bounds what one code stands for: a ligature is a
	// few letters; a longer text is no glyph's.
	maxCMapTextBytes = 64
	// maxCMapOperands bounds what a map holds between two operators.
	maxCMapOperands = 1 << 12
)

// parseCMap reads a ToUnicode stream. Only the operators that map codes
// matter; the PostScript around them (findresource, dictionaries, the
// CIDSystemInfo) is passed over.
func parseCMap(r io.Reader) (*cmap, error) {
	m := &cmap{text: map[cmapCode]string{}}
	l := newLexer(r)
	var (
		section string // "codespacerange", "bfchar", "bfrange" or ""
		args    []operand
	)
	for {
		tok, err := l.next()
		if err != nil {
			return nil, err
		}
		switch tok.kind {
		case tokEnd:
			return m, nil
		case tokString:
			args = append(args, operand{kind: tokString, str: string(tok.text)})
		case tokArrayOpen:
			arr, err := readArray(l, 0, maxCMapOperands)
			if err != nil {
				return nil, err
			}
			args = append(args, arr)
		case tokKeyword:
			switch kw := string(tok.text); kw {
			case "begincodespacerange", "beginbfchar", "beginbfrange":
				section, args = kw[len("begin"):], args[:0]
			case "endcodespacerange", "endbfchar", "endbfrange":
				section, args = "", args[:0]
			default:
				args = args[:0]
			}
		default:
			// Numbers (entry counts, which the entries themselves tell),
			// names, dictionaries: not mappings.
		}
		// Entries are taken as soon as they are whole, so that a section
		// of any length holds one entry at a time.
		switch {
		case section == "codespacerange" && len(args) == 2:
			m.addSpace(args[0].str, args[1].str)
			args = args[:0]
		case section == "bfchar" && len(args) == 2:
			m.addChar(args[0].str, args[1].str)
			args = args[:0]
		case section == "bfrange" && len(args) == 3:
			m.addRange(args[0].str, args[1].str, args[2])
			args = args[:0]
		case len(args) > maxCMapOperands:
			args = args[:0]
		}
	}
}

// codeOf reads a source code: 1 to 4 bytes, big-endian.
func codeOf(s string) (cmapCode, bool) {
	if len(s) < 1 || len(s) > 4 {
		return cmapCode{}, false
	}
	var c uint32
	for i := range len(s) {
		c = c<<8 | uint32(s[i])
	}
	return cmapCode{code: c, n: uint8(len(s))}, true
}

func (m *cmap) addSpace(lo, hi string) {
	l, ok1 := codeOf(lo)
	h, ok2 := codeOf(hi)
	if !ok1 || !ok2 || l.n != h.n || len(m.spaces[l.n-1]) >= 256 {
		return
	}
	m.spaces[l.n-1] = append(m.spaces[l.n-1], codeRange{l.code, h.code})
}

func (m *cmap) full() bool { return m.mapped >= maxCMapCodes }

func (m *cmap) add(c cmapCode, units []uint16) {
	if m.full() {
		return
	}
	m.mapped++
	m.text[c] = string(utf16.Decode(units))
}

func (m *cmap) addChar(src, dst string) {
	c, ok := codeOf(src)
	if !ok || len(dst) > maxCMapTextBytes {
		return
	}
	m.add(c, utf16Units(dst))
}

// addRange maps lo…hi to dst, a string whose last unit counts up with the
// code, or an array of strings, one per code.
func (m *cmap) addRange(lo, hi string, dst operand) {
	l, ok1 := codeOf(lo)
	h, ok2 := codeOf(hi)
	if !ok1 || !ok2 || l.n != h.n || h.code < l.code {
		return
	}
	switch dst.kind {
	case tokString:
		if len(dst.str) > maxCMapTextBytes {
			return
		}
		base := utf16Units(dst.str)
		if len(base) == 0 {
			return
		}
		for c := l.code; c <= h.code && !m.full(); c++ {
			units := append([]uint16(nil), base...)
			units[len(units)-1] += uint16(c - l.code)
			m.add(cmapCode{code: c, n: l.n}, units)
			if c == h.code {
				break // hi may be the largest code of its length
			}
		}
	case tokArrayOpen:
		for i, d := range dst.arr {
			c := l.code + uint32(i)
			if c > h.code || c < l.code || m.full() {
				break
			}
			if d.kind == tokString && len(d.str) <= maxCMapTextBytes {
				m.add(cmapCode{code: c, n: l.n}, utf16Units(d.str))
			}
		}
	}
}

// utf16Units reads big-endian UTF-16, as maps write their text; a lone
// byte is a unit of its own.
func utf16Units(s string) []uint16 {
	units := make([]uint16, 0, (len(s)+1)/2)
	for i := 0; i+1 < len(s); i += 2 {
		units = append(units, uint16(s[i])<<8|uint16(s[i+1]))
	}
	if len(s)%2 == 1 {
		units = append(units, uint16(s[len(s)-1]))
	}
	return units
}

// split cuts the next code off s by the codespace ranges; ok is false
// when none holds it.
func (m *cmap) split(s string) (c cmapCode, ok bool) {
	for n := 1; n <= 4 && n <= len(s); n++ {
		code, _ := codeOf(s[:n])
		for _, r := range m.spaces[n-1] {
			if code.code >= r.lo && code.code <= r.hi {
				return code, true
			}
		}
	}
	return cmapCode{}, false
}
