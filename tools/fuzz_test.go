package tools

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"koe/internal/pdftext/pdftest"
)

// FuzzCalculator runs the calculator's tool function itself, not Box.Call,
// whose recover would hide a panic from the fuzzer.
func FuzzCalculator(f *testing.F) {
	for _, seed := range []string{
		"1+2", "(17.5 * 3 + 2) / 4", "sqrt(2) * pi", "round(2.345, 2)", "3 > 2 ? 1 : 0",
		// Nesting and size.
		strings.Repeat("(", 500) + "1" + strings.Repeat(")", 500),
		strings.Repeat("-", 999) + "1",
		strings.Repeat("sqrt(", 100) + "2" + strings.Repeat(")", 100),
		"max(" + strings.Repeat("1,", 150) + "1)",
		strings.Repeat("1+", 499) + "1",
		// Huge and tiny numbers.
		"9^9^9^9", "10^308*10", "1e308", "1e309", "5e-324/2", "log(5e-324)", "1 % 5e-324",
		"9223372036854775807 + 1", "-9223372036854775808", "9223372036854775808", "0x7fffffffffffffff", "1_0__0",
		"round(1, 1e300)", "round(1e308, -15)", "round(1e308, 15)", "exp(709.8)", "tan(pi/2)", "2^1024", "2^-1075",
		// Undefined results.
		"1/0", "0/0", "1%0", "0^0", "0^-1", "(-1)^0.5", "sqrt(-0)", "log(0)", "log(1, 1)", "-0 % 1",
		// Unicode and bytes.
		"π*2", "２＋３", "√4", "1÷0", "3 × 4", "\u202e1+1", "\xff\xfe", "1\x00+1", "e\u0301", "ｐｉ",
		// Other corners of expr's language.
		"", " ", "1+", "sqrt(", ")", "'a'", "`a`", `"a" + 1`, "[1]", "{}", "{a: 1}", "#", "$env", "$env.x",
		"let x = 1; x", "1; 2", "1..1000000000", "map(1..1000000000, #)", "len([1])", "now()",
		"true ? 1 : 'a'", "nil ?? 1", "a?.b", "a[1:2]", "foo()()", "pi()()", "e(1)", "()", "(1)(2)",
		"1 | max(2)", "1 | pi()", "-pi()", "not 1", "!true", "true and 1", "1 == 1 == true", "if 1 { 2 } else { 3 }",
		"_add(1, 2)", "sqrt", "toJSON(1)", "1 matches 'a'",
	} {
		f.Add(seed)
	}
	run := newCalculator(Options{}.withDefaults()).run
	f.Fuzz(func(t *testing.T, expression string) {
		args, err := json.Marshal(calcArgs{Expression: expression})
		if err != nil {
			t.Fatal(err)
		}
		got, err := run(context.Background(), string(args))
		checkOutcome(t, expression, got, err)
		if err == nil {
			if got != "true" && got != "false" {
				v, perr := strconv.ParseFloat(got, 64)
				if perr != nil || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%q = %q: not a finite number", expression, got)
				}
			}
		}
		again, err2 := run(context.Background(), string(args))
		if again != got || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
			t.Fatalf("%q: %q, %v, then %q, %v", expression, got, err, again, err2)
		}
	})
}

// FuzzToolArguments gives every built-in tool whatever arguments a model
// might write. The web tools' client refuses every request, so this stays
// off the network and fuzzes what happens before one: decoding and
// checking the arguments, and building the request.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `1`, `{"expression":"1+1"}`, `{"timezone":"Europe/Berlin"}`,
		`{"timezone":"../../etc/passwd"}`, `{"timezone":"\u0000"}`, `{"expression":null}`, `{"expression":{}}`,
		`{"expression":"1","expression":2}`, `{"EXPRESSION":"1"}`, `{"a":1}`, `{"timezone":"UTC"} x`, `{`, "\xff",
		`{"location":"Berlin"}`, `{"location":"Paris, France","days":7}`, `{"location":"x","days":0}`,
		`{"location":"x","days":8}`, `{"location":"x","days":2.5}`, `{"location":"x","days":"3"}`, `{"location":"x","days":1e999}`,
		`{"location":"  "}`, `{"location":","}`, `{"location":"%00&name=x#"}`, `{"location":"\u0000"}`,
		`{"query":"Marie Curie"}`, `{"query":"x","limit":10}`, `{"query":"x","limit":11}`, `{"query":"x","limit":-1}`,
		`{"query":"a&srsearch=b"}`, `{"query":""}`, `{"query":"x","limit":null}`,
		`{"path":"notes/plan.md"}`, `{"path":"."}`, `{"path":""}`, `{"path":"../x"}`, `{"path":"/etc/passwd"}`,
		`{"path":"a/../../x"}`, `{"path":"a\u0000b"}`, `{"path":"notes/plan.md","start_char":5,"num_chars":3}`,
		`{"path":"notes/plan.md","start_char":99999999}`, `{"path":"notes/plan.md","num_chars":16001}`,
		`{"path":"notes/plan.md","start_char":-1}`, `{"path":"bin.dat"}`, `{"path":"doc.pdf"}`, `{"path":"notes"}`,
	} {
		f.Add(seed)
	}
	root := f.TempDir()
	writeTree(f, root, map[string]string{
		"notes/plan.md": "# Plan\n\nGrüße, ünïcödé and more.\n",
		"bin.dat":       "\x00\x01\x02binary",
		"doc.pdf":       string(pdftest.Minimal(false, "fuzzing a PDF")),
	})
	opts := Options{
		HTTPClient: &http.Client{Transport: refuseAll{}},
		WebSearch:  WebSearchSettings{Provider: ProviderSearXNG, BaseURL: "http://search.invalid"},
		Files:      FilesSettings{Root: root},
	}.withDefaults()
	var tools []tool
	for _, b := range builtins {
		if b.name == pythonName && testing.Short() {
			continue // it runs bwrap and python3, which the short lane does not
		}
		tl, err := b.build(opts)
		if err != nil {
			f.Fatalf("%s: %v", b.name, err)
		}
		tools = append(tools, tl)
	}
	f.Fuzz(func(t *testing.T, args string) {
		for _, tl := range tools {
			got, err := tl.run(context.Background(), args)
			checkOutcome(t, tl.spec.Name+" "+args, got, err)
		}
	})
}

// FuzzPDFText gives the PDF reader broken files: a malformed PDF is an
// error for the call, never a crash of the server.
func FuzzPDFText(f *testing.F) {
	f.Add(pdftest.Minimal(false, "Hello (world)"))
	f.Add(pdftest.Minimal(true, "deflated"))
	f.Add(reportPDF())
	f.Add([]byte("%PDF-1.4\n"))
	f.Add([]byte("%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		got, err := pdfText(context.Background(), "f.pdf", data)
		checkOutcome(t, "a PDF", got, err)
	})
}

// refuseAll is a transport that fails every request without sending it.
type refuseAll struct{}

func (refuseAll) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no network in this test")
}

// checkOutcome asserts a tool gave a result or an error, and that an
// error is one line the model can read.
func checkOutcome(t *testing.T, input, got string, err error) {
	t.Helper()
	switch {
	case err == nil && got == "":
		t.Fatalf("%q: neither a result nor an error", input)
	case err != nil && got != "":
		t.Fatalf("%q: a result %q and an error %v", input, got, err)
	case err != nil && (err.Error() == "" || strings.Contains(err.Error(), "\n")):
		t.Fatalf("%q: error %q is not one line", input, err.Error())
	}
}
