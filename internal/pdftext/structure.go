package pdftext

import (
	"bytes"
	"compress/zlib"
	"errors"
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
	return checkXref(data)
}

// value is one PDF object as read here: an operand, a dictionary's
// entries, or a reference.
type value struct {
	operand
	dict map[string]value
	ref  bool // "n g R"
	// holdsRef: an array or dictionary with a reference inside.
	holdsRef bool
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
			arr.holdsRef = arr.holdsRef || v.ref || v.holdsRef
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
			d.holdsRef = d.holdsRef || v.ref || v.holdsRef
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

// xrefTable is what the cross-reference sections say, as the library
// will take it: the newest section's entry for an object wins.
type xrefTable struct {
	// kinds holds each object's entry: 0 none yet, 1 at an offset in the
	// file, 2 in an object stream, 3 free.
	kinds   []byte
	offsets []int64
	// inStream marks the objects that hold other objects (object
	// streams), by number.
	inStream map[int64]bool
}

const (
	entryNone = iota
	entryFile
	entryStream
	entryFree
)

// set records an entry unless a newer section had one for object n.
func (x *xrefTable) set(n int64, kind byte, offset int64) {
	if n < 0 || n >= maxObjects {
		return
	}
	if int(n) >= len(x.kinds) {
		x.kinds = append(x.kinds, make([]byte, int(n)+1-len(x.kinds))...)
		x.offsets = append(x.offsets, make([]int64, int(n)+1-len(x.offsets))...)
	}
	if x.kinds[n] != entryNone {
		return
	}
	x.kinds[n], x.offsets[n] = kind, offset
}

func (x *xrefTable) kind(n int64) byte {
	if n < 0 || n >= int64(len(x.kinds)) {
		return entryNone
	}
	return x.kinds[n]
}

// maxObjectStreams bounds the object streams a file's entries name (real
// files have a few hundred at most); each is checked.
const maxObjectStreams = 1 << 16

// checkXref follows the chain of cross-reference sections from the last
// startxref, as the library will, then checks the object streams the
// entries name.
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
	x := &xrefTable{inStream: map[int64]bool{}}
	seen := map[int64]bool{}
	for off := int64(t.num); ; {
		if seen[off] {
			return unreadable("its cross-reference sections loop")
		}
		if seen[off] = true; len(seen) > maxXrefSections {
			return unreadable("it has too many cross-reference sections")
		}
		prev, err := checkXrefSection(data, off, x)
		if err != nil {
			return err
		}
		next, ok := prev.integer()
		if !ok {
			break
		}
		off = next
	}
	return checkObjectStreams(data, x)
}

// checkXrefSection reads the section at off (a table or a stream) into x
// and returns its /Prev.
func checkXrefSection(data []byte, off int64, x *xrefTable) (value, error) {
	o := at(data, off, true)
	t, err := o.token()
	if err != nil || (t.kind != tokKeyword && t.kind != tokNumber) {
		return value{}, nil
	}
	if t.kind == tokKeyword {
		if string(t.text) != "xref" {
			return value{}, nil
		}
		return checkXrefTable(o, x)
	}
	// "n g obj << … >> stream": a cross-reference stream.
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
	var widths []int
	for _, w := range d.dict["W"].arr {
		if w.kind != tokNumber || w.num < 0 || w.num > 8 || w.num != float64(int(w.num)) {
			return value{}, unreadable("its cross-reference stream has field widths no file uses")
		}
		widths = append(widths, int(w.num))
	}
	// Entries of no bytes are read without reading: as many as the
	// Index says, where no context reaches.
	if len(widths) < 3 || widths[0]+widths[1]+widths[2] < 1 {
		return value{}, unreadable("its cross-reference stream has entries of no bytes")
	}
	index := d.dict["Index"].arr
	if index == nil {
		size, _ := d.dict["Size"].integer()
		index = []operand{{kind: tokNumber}, {kind: tokNumber, num: float64(size)}}
	}
	total := 0.0
	for i := 0; i+1 < len(index); i += 2 {
		start, count := index[i].num, index[i+1].num
		if start < 0 || count < 0 || start+count > maxObjects || start != float64(int64(start)) || count != float64(int64(count)) {
			return value{}, unreadable(fmt.Sprintf("its cross-reference stream numbers objects up to %.0f", start+count))
		}
		if total += count; total > maxObjects {
			return value{}, unreadable("its cross-reference stream holds too many entries")
		}
	}
	entries, ok := xrefStreamData(o, d)
	if !ok {
		return value{}, unreadable("its cross-reference stream is stored in a way koe does not read")
	}
	readXrefEntries(entries, widths, index, x)
	return d.dict["Prev"], nil
}

// xrefStreamData is the decoded data of the stream whose dictionary d the
// reader o has just read: deflated, or not, as the library reads it.
func xrefStreamData(o *objects, d value) (io.Reader, bool) {
	t, err := o.token()
	if err != nil || t.kind != tokKeyword || string(t.text) != "stream" {
		return nil, false
	}
	l := o.lex
	if c, ok := l.peekByte(); ok && c == '\r' {
		l.pos++
	}
	if c, ok := l.peekByte(); ok && c == '\n' {
		l.pos++
	}
	length, ok := d.dict["Length"].integer()
	if !ok {
		return nil, false
	}
	raw := l.buf[l.pos:]
	raw = raw[:min(int64(len(raw)), length)]
	filter, params := d.dict["Filter"], d.dict["DecodeParms"]
	if filter.kind == tokArrayOpen && len(filter.arr) == 1 {
		filter = value{operand: filter.arr[0]}
		if params.kind == tokArrayOpen {
			params = value{} // an array of parameters: not read below
		}
	}
	switch {
	case filter.kind == 0 && params.kind == 0:
		return bytes.NewReader(raw), true
	case filter.kind != tokName || filter.str != "FlateDecode":
		return nil, false
	}
	z, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		return bytes.NewReader(nil), true // as the library, which fails on it
	}
	if params.kind == 0 {
		return z, true
	}
	pred, columns := params.dict["Predictor"], params.dict["Columns"]
	if p, _ := pred.integer(); pred.kind != 0 && p != 12 {
		return nil, false
	}
	if pred.kind == 0 {
		return z, true
	}
	c, ok := columns.integer()
	if !ok || c < 1 || c > 1<<10 {
		return nil, false
	}
	return &pngUp{r: z, row: make([]byte, c+1), prev: make([]byte, c+1)}, true
}

// pngUp undoes the PNG "up" predictor (PDF 32000-1, 7.4.4.4): each row
// of columns bytes, after a filter byte of 2, is added to the one above.
type pngUp struct {
	r         io.Reader
	row, prev []byte
	pending   []byte
}

func (p *pngUp) Read(b []byte) (int, error) {
	if len(p.pending) == 0 {
		if _, err := io.ReadFull(p.r, p.row); err != nil {
			return 0, err
		}
		if p.row[0] != 2 {
			return 0, errors.New("malformed PNG-Up encoding")
		}
		for i := 1; i < len(p.row); i++ {
			p.prev[i] += p.row[i]
		}
		p.pending = p.prev[1:]
	}
	n := copy(b, p.pending)
	p.pending = p.pending[n:]
	return n, nil
}

// readXrefEntries reads a stream's entries, as many as index says, until
// its data ends.
func readXrefEntries(r io.Reader, widths []int, index []operand, x *xrefTable) {
	entry := make([]byte, widths[0]+widths[1]+widths[2])
	field := func(b []byte) int64 {
		var v int64
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		return v
	}
	for i := 0; i+1 < len(index); i += 2 {
		start, count := int64(index[i].num), int64(index[i+1].num)
		for n := start; n < start+count; n++ {
			if _, err := io.ReadFull(r, entry); err != nil {
				return
			}
			kind := int64(1)
			if widths[0] > 0 {
				kind = field(entry[:widths[0]])
			}
			second := field(entry[widths[0] : widths[0]+widths[1]])
			switch kind {
			case 0:
				x.set(n, entryFree, 0)
			case 1:
				x.set(n, entryFile, second)
			case 2:
				if x.kind(n) == entryNone {
					if len(x.inStream) >= maxObjectStreams && !x.inStream[second] {
						continue
					}
					x.inStream[second] = true
				}
				x.set(n, entryStream, 0)
			}
		}
	}
}

// checkXrefTable reads a table's subsections ("start count", then count
// entries of an offset, a generation and n or f) after its "xref", and
// returns its trailer's /Prev.
func checkXrefTable(o *objects, x *xrefTable) (value, error) {
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
		for n := int64(t.num); n < int64(t.num+c.num); n++ {
			off, err1 := o.token()
			_, err2 := o.token()
			kind, err3 := o.token()
			if err1 != nil || err2 != nil || err3 != nil || kind.kind != tokKeyword {
				return value{}, nil
			}
			switch string(kind.text) {
			case "n":
				x.set(n, entryFile, int64(off.num))
			case "f":
				x.set(n, entryFree, 0)
			default:
				return value{}, nil
			}
		}
	}
}

// checkObjectStreams checks each object stream the entries name, and
// those they extend. To find an object in a stream, the library resolves
// the stream and the entries of its dictionary it needs to read it, then
// reads as many entries of the stream's list as /N says: a stream that is
// itself in a stream, or one of whose entries is, makes it recurse until
// the process dies of it (a stack overflow is fatal), and /N of 10^12
// loops where no read happens.
func checkObjectStreams(data []byte, x *xrefTable) error {
	var todo []int64
	for n := range x.inStream {
		todo = append(todo, n)
	}
	checked := map[int64]bool{}
	for len(todo) > 0 {
		n := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if checked[n] {
			continue
		}
		if checked[n] = true; len(checked) > maxObjectStreams {
			return unreadable("it names too many object streams")
		}
		switch x.kind(n) {
		case entryStream:
			return unreadable("an object stream is itself in an object stream")
		case entryFile:
		default:
			continue // the library finds no stream there, and says so
		}
		d, ok := objectDict(at(data, x.offsets[n], true))
		if !ok {
			continue
		}
		for _, key := range []string{"Type", "N", "First", "Filter", "DecodeParms"} {
			if v := d.dict[key]; v.ref || v.holdsRef {
				return unreadable(fmt.Sprintf("an object stream's /%s is kept elsewhere", key))
			}
		}
		for _, key := range []string{"Length", "Extends"} {
			v := d.dict[key]
			if !v.ref {
				continue
			}
			target := int64(v.num)
			if x.kind(target) == entryStream {
				return unreadable(fmt.Sprintf("an object stream's /%s is in an object stream", key))
			}
			if key == "Extends" {
				todo = append(todo, target)
			}
		}
		if v, ok := d.dict["N"]; ok {
			if count, ok := v.integer(); !ok || count > maxStreamObjects {
				return unreadable("an object stream's /N is not a count a file could hold")
			}
		}
	}
	return nil
}

// objectDict reads "n g obj <<…>>" and returns the dictionary.
func objectDict(o *objects) (value, bool) {
	for range 2 {
		if t, err := o.token(); err != nil || t.kind != tokNumber {
			return value{}, false
		}
	}
	if t, err := o.token(); err != nil || t.kind != tokKeyword || string(t.text) != "obj" {
		return value{}, false
	}
	d, err := o.value(0)
	return d, err == nil && d.dict != nil
}
