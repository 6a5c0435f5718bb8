package pdftext

import (
	"bytes"
	"fmt"
	"io"
)

// Some numbers in a PDF's structure the library trusts: it makes a table
// as large as a cross-reference section says, and it reads as many
// entries as an object stream says it holds. A file of a few hundred
// bytes could so make it allocate terabytes (the runtime's out-of-memory
// is fatal: it takes the whole server down) or loop at the end of a
// stream, where no read happens and no context reaches it. They are read
// here first, with koe's lexer, straight from the file's bytes.

const (
	// maxObjects bounds the object numbers of a file: a table of them is
	// 32 bytes an entry, and real files of tens of megabytes hold a few
	// hundred thousand objects.
	maxObjects = 1 << 23
	// maxStreamObjects bounds the objects one object stream holds (real
	// ones hold a few hundred): the library reads that many entries each
	// time it looks one up.
	maxStreamObjects = 1 << 20
	// maxXrefSections bounds the chain of cross-reference sections
	// (updates appended to a file add one each).
	maxXrefSections = 1024
)

// checkStructure refuses a file whose cross-reference sections or object
// streams the library cannot be trusted with; nil lets the library read
// it and say what else is wrong.
func checkStructure(data []byte) error {
	if err := checkXref(data); err != nil {
		return err
	}
	return checkObjectStreams(data)
}

// value is one PDF object as read here: an operand, a dictionary's
// entries, or a reference.
type value struct {
	operand
	dict map[string]value
	ref  bool // "n g R"
}

// objects reads PDF objects from a lexer, with the one token of lookahead
// a reference needs.
// A token's text is the lexer's scratch, valid until the lexer reads on:
// a token pushed back is read again before it does.
type objects struct {
	lex  *lexer
	back []token
	// arrays: keep the elements of arrays (the cross-reference checks
	// need /W and /Index); the scan of object streams needs none, and a
	// page tree's /Kids may be long.
	arrays bool
}

func (o *objects) token() (token, error) {
	if n := len(o.back); n > 0 {
		t := o.back[n-1]
		o.back = o.back[:n-1]
		return t, nil
	}
	return o.lex.next()
}

// value reads one object.
func (o *objects) value(depth int) (value, error) {
	if depth >= maxNesting {
		return value{}, errTooDeep
	}
	t, err := o.token()
	if err != nil {
		return value{}, err
	}
	switch t.kind {
	case tokNumber:
		// "n g R" is a reference; anything else after a number is not
		// part of it.
		t2, err := o.token()
		if err != nil {
			return value{}, err
		}
		if t2.kind == tokNumber {
			t3, err := o.token()
			if err != nil {
				return value{}, err
			}
			if t3.kind == tokKeyword && string(t3.text) == "R" {
				return value{operand: operand{kind: tokNumber, num: t.num}, ref: true}, nil
			}
			o.back = append(o.back, t3)
		}
		o.back = append(o.back, t2)
		return value{operand: operand{kind: tokNumber, num: t.num}}, nil
	case tokString, tokName, tokKeyword:
		return value{operand: operand{kind: t.kind, str: string(t.text)}}, nil
	case tokArrayOpen:
		arr := value{operand: operand{kind: tokArrayOpen}}
		for {
			t, err := o.token()
			if err != nil {
				return value{}, err
			}
			if t.kind == tokArrayClose || t.kind == tokEnd {
				return arr, nil
			}
			o.back = append(o.back, t)
			v, err := o.value(depth + 1)
			if err != nil {
				return value{}, err
			}
			if o.arrays {
				arr.arr = append(arr.arr, v.operand)
			}
		}
	case tokDictOpen:
		return o.dict(depth + 1)
	}
	return value{}, nil // the end, or a stray bracket
}

// dict reads a dictionary's entries after its "<<".
func (o *objects) dict(depth int) (value, error) {
	d := value{operand: operand{kind: tokDictOpen}, dict: map[string]value{}}
	for {
		t, err := o.token()
		if err != nil {
			return value{}, err
		}
		switch t.kind {
		case tokDictClose, tokEnd:
			return d, nil
		case tokName:
			key := string(t.text)
			v, err := o.value(depth)
			if err != nil {
				return value{}, err
			}
			d.dict[key] = v
		}
	}
}

// integer is v as a direct non-negative integer.
func (v value) integer() (int64, bool) {
	if v.kind != tokNumber || v.ref || v.num < 0 || v.num != float64(int64(v.num)) {
		return 0, false
	}
	return int64(v.num), true
}

// at reads from offset off of data.
func at(data []byte, off int64, arrays bool) *objects {
	if off < 0 || off >= int64(len(data)) {
		off = int64(len(data))
	}
	// The lexer reads the slice in place: it is its whole buffer.
	return &objects{lex: &lexer{buf: data[off:], err: io.EOF}, arrays: arrays}
}

// checkXref follows the chain of cross-reference sections from the last
// startxref, as the library will.
func checkXref(data []byte) error {
	tail := data[max(len(data)-1024, 0):]
	i := bytes.LastIndex(tail, []byte("startxref"))
	if i < 0 {
		return nil
	}
	t, _ := at(tail, int64(i+len("startxref")), false).token()
	if t.kind != tokNumber {
		return nil
	}
	seen := map[int64]bool{}
	for off := int64(t.num); ; {
		if seen[off] {
			return unreadable("its cross-reference sections loop")
		}
		if seen[off] = true; len(seen) > maxXrefSections {
			return unreadable("it has too many cross-reference sections")
		}
		prev, err := checkXrefSection(data, off)
		if err != nil {
			return err
		}
		next, ok := prev.integer()
		if !ok {
			return nil
		}
		off = next
	}
}

// checkXrefSection checks the section at off (a table or a stream) and
// returns its /Prev.
func checkXrefSection(data []byte, off int64) (value, error) {
	o := at(data, off, true)
	t, err := o.token()
	if err != nil || (t.kind != tokKeyword && t.kind != tokNumber) {
		return value{}, nil
	}
	if t.kind == tokKeyword {
		if string(t.text) != "xref" {
			return value{}, nil
		}
		return checkXrefTable(o)
	}
	// "n g obj << … >>": a cross-reference stream.
	if g, err := o.token(); err != nil || g.kind != tokNumber {
		return value{}, nil
	}
	if kw, err := o.token(); err != nil || kw.kind != tokKeyword || string(kw.text) != "obj" {
		return value{}, nil
	}
	d, err := o.value(0)
	if err != nil || d.dict == nil {
		return value{}, nil
	}
	if size, ok := d.dict["Size"]; ok {
		if n, ok := size.integer(); !ok || n > maxObjects {
			return value{}, unreadable(fmt.Sprintf("its cross-reference stream claims %.0f objects", size.num))
		}
	}
	// Entries of no bytes are read without reading: as many as the
	// Index says, where no context reaches.
	width := 0.0
	for _, w := range d.dict["W"].arr {
		if w.kind != tokNumber || w.num < 0 || w.num > 8 {
			return value{}, unreadable("its cross-reference stream has field widths no file uses")
		}
		width += w.num
	}
	if _, ok := d.dict["W"]; ok && width < 1 {
		return value{}, unreadable("its cross-reference stream has entries of no bytes")
	}
	index := d.dict["Index"].arr
	total := 0.0
	for i := 0; i+1 < len(index); i += 2 {
		start, count := index[i].num, index[i+1].num
		if start < 0 || count < 0 || start+count > maxObjects {
			return value{}, unreadable(fmt.Sprintf("its cross-reference stream numbers objects up to %.0f", start+count))
		}
		if total += count; total > maxObjects {
			return value{}, unreadable("its cross-reference stream holds too many entries")
		}
	}
	return d.dict["Prev"], nil
}

// checkXrefTable checks a table's subsections ("start count" and count
// entries) after its "xref", and returns its trailer's /Prev.
func checkXrefTable(o *objects) (value, error) {
	for {
		t, err := o.token()
		if err != nil || t.kind == tokEnd {
			return value{}, nil
		}
		if t.kind == tokKeyword && string(t.text) == "trailer" {
			d, err := o.value(0)
			if err != nil {
				return value{}, nil
			}
			return d.dict["Prev"], nil
		}
		c, err := o.token()
		if err != nil || t.kind != tokNumber || c.kind != tokNumber {
			return value{}, nil
		}
		if t.num < 0 || c.num < 0 || t.num+c.num > maxObjects {
			return value{}, unreadable(fmt.Sprintf("its cross-reference table numbers objects up to %.0f", t.num+c.num))
		}
		// The entries: an offset, a generation and n or f each.
		for range int(c.num) * 3 {
			if t, err := o.token(); err != nil || t.kind == tokEnd {
				return value{}, nil
			}
		}
	}
}

// checkObjectStreams finds the dictionaries of objects ("… obj <<") in
// the file and checks those of object streams: how many objects they say
// they hold must be a number, and one a real file could hold. Each byte
// is read once: a dictionary's bytes are not searched again.
func checkObjectStreams(data []byte) error {
	for i := 0; i < len(data); {
		j := bytes.Index(data[i:], []byte("obj"))
		if j < 0 {
			return nil
		}
		k := i + j + len("obj")
		for k < len(data) && k < i+j+len("obj")+16 && isWhite(data[k]) {
			k++
		}
		if !bytes.HasPrefix(data[k:], []byte("<<")) {
			i = k
			continue
		}
		o := at(data, int64(k+2), false)
		d, err := o.dict(1)
		i = k + 2 + o.lex.pos
		if err != nil || d.dict["Type"].str != "ObjStm" || d.dict["Type"].kind != tokName {
			continue
		}
		for _, key := range []string{"N", "First"} {
			v, ok := d.dict[key]
			if !ok {
				continue
			}
			if n, ok := v.integer(); !ok || (key == "N" && n > maxStreamObjects) {
				return unreadable(fmt.Sprintf("an object stream's /%s is not a count a file could hold", key))
			}
		}
	}
	return nil
}
