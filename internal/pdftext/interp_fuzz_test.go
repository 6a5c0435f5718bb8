package pdftext

import (
	"bytes"
	"context"
	"testing"
)

// FuzzContent runs koe's own interpreter and character-map reader on any
// bytes, outside the recover that guards the library: whatever a stream
// holds, they end without a panic.
func FuzzContent(f *testing.F) {
	f.Add([]byte("BT /F1 12 Tf 72 720 Td (Hello) Tj [(W)20(ord)] TJ 0 -14 Td (x) ' 1 2 (y) \" ET"))
	f.Add([]byte("q 1 0 0 1 5 5 cm Q Q Q BI /W 1 ID \x00\xff EI <</A [1 2 <<>>]>> BDC EMC"))
	f.Add([]byte("1 begincodespacerange <00> <ff> endcodespacerange 2 beginbfchar <01> <0041> <02> <00660069> endbfchar " +
		"1 beginbfrange <10> <20> <0061> endbfrange 1 beginbfrange <30> <32> [<0041> <0042>] endbfrange"))
	f.Add([]byte("(unclosed \\( <4 [ [ [ /N#41 -.5 +3. 1.2.3"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseCMap(bytes.NewReader(data))
		if err == nil {
			composite := &font{composite: true, cmap: m, defaultWidth: 1000}
			simple := &font{cmap: m, bytes: latin1}
			for _, f := range []*font{composite, simple} {
				for s := string(data); s != ""; {
					code, n := f.code(s)
					if n < 1 || n > len(s) {
						t.Fatalf("a code of %d bytes from %d", n, len(s))
					}
					_ = f.text(code, n)
					_ = f.width(code)
					s = s[n:]
				}
			}
		}
		fonts := func(string) (*font, error) { return &font{composite: true, defaultWidth: 500}, nil }
		w := &pageWriter{m: newMeter(context.Background(), Limits{MaxInflated: 1 << 20})}
		in := &interp{lex: newLexer(bytes.NewReader(data)), fonts: fonts, out: w}
		if in.run() == nil {
			_ = w.end()
		}
		_ = w.text()
	})
}
