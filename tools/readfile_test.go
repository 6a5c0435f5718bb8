package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"koe/agent"
	"koe/internal/pdftext/pdftest"
)

func writeTree(tb testing.TB, root string, files map[string]string) {
	tb.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

const planText = "# Plan\n\nGrüße aus Köln — 日本語も少し。\nLast line.\n"

// reportPDF has two pages: lines placed with Td in Helvetica (no widths),
// then, deflated, words spaced by TJ kerning in Courier, as TeX writes
// them.
func reportPDF() []byte {
	return pdftest.Build("",
		pdftest.Page{Content: "BT /F1 12 Tf 72 720 Td (Hello from koe.) Tj 0 -16 Td (Second line, caf\\351.) Tj ET"},
		pdftest.Page{Content: "BT /F2 10 Tf 72 700 Td [(W)20(ord)-600(spacing)-600(by)-600(kerning.)] TJ 0 -14 Td (Courier keeps its widths.) Tj ET", Compress: true},
	)
}

// fileTree builds a shared folder with a sibling outside it, and links
// that try to leave it.
func fileTree(t *testing.T) (root string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "shared")
	writeTree(t, base, map[string]string{
		"outside/secret.txt":                "the secret",
		"shared/notes/plan.md":              planText,
		"shared/notes/deep/nested/todo.txt": "buy milk",
		"shared/data.json":                  `{"a": [1, 2, 3]}`,
		"shared/main.go":                    "package main\n\nfunc main() {}\n",
		"shared/empty.txt":                  "",
		"shared/crlf.txt":                   "\xef\xbb\xbfone\r\ntwo\r\n",
		"shared/latin1.txt":                 "caf\xe9 cr\xe8me",
		"shared/image.png":                  "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01",
		"shared/big.txt":                    strings.Repeat("x", 2000),
		"shared/report.pdf":                 string(reportPDF()),
		"shared/scanned.pdf":                string(pdftest.Build("", pdftest.Page{Content: "0 0 m 100 100 l S"})),
		"shared/broken.pdf":                 "%PDF-1.4\nthis is not a PDF at all\n",
	})
	if err := os.Mkdir(filepath.Join(root, "void"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"link-in":       "notes/plan.md",
		"link-dir-in":   "notes",
		"link-abs-in":   filepath.Join(root, "notes/plan.md"),
		"link-out":      "../outside/secret.txt",
		"link-dir-out":  "../outside",
		"link-abs-out":  filepath.Join(base, "outside/secret.txt"),
		"notes/sneaky":  "../../outside/secret.txt",
		"loop":          "loop",
		"link-dangling": "nowhere.txt",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func readFileBox(t *testing.T, opts Options) *Box {
	t.Helper()
	return newBox(t, []string{"read_file"}, opts)
}

func readFile(t *testing.T, b *Box, args string) (string, error) {
	t.Helper()
	return b.Call(context.Background(), agent.ToolCall{Name: "read_file", Arguments: args})
}

func TestReadFile(t *testing.T) {
	root := fileTree(t)
	b := readFileBox(t, Options{Files: FilesSettings{Root: root, MaxBytes: 1024}})
	planLen := utf8.RuneCountInString(planText)
	tests := []struct {
		args string
		want string
	}{
		{`{"path":"notes/plan.md"}`, fmt.Sprintf("[notes/plan.md: characters 0–%d of %d]\n%s", planLen, planLen, planText)},
		{`{"path":"./notes/plan.md"}`, fmt.Sprintf("[notes/plan.md: characters 0–%d of %d]\n%s", planLen, planLen, planText)},
		{`{"path":"notes/deep/../plan.md"}`, fmt.Sprintf("[notes/plan.md: characters 0–%d of %d]\n%s", planLen, planLen, planText)},
		{`{"path":"notes/deep/nested/todo.txt"}`, "[notes/deep/nested/todo.txt: characters 0–8 of 8]\nbuy milk"},
		{`{"path":"data.json"}`, "[data.json: characters 0–16 of 16]\n{\"a\": [1, 2, 3]}"},
		{`{"path":"main.go","num_chars":12}`, "[main.go: characters 0–12 of 29; read on with start_char 12]\npackage main"},
		{`{"path":"empty.txt"}`, "[empty.txt: characters 0–0 of 0; the file is empty]\n"},
		// The byte order mark goes, line ends become \n.
		{`{"path":"crlf.txt"}`, "[crlf.txt: characters 0–8 of 8]\none\ntwo\n"},
		// Not UTF-8, but text: shown with replacement characters.
		{`{"path":"latin1.txt"}`, "[latin1.txt: characters 0–10 of 10]\ncaf\uFFFD cr\uFFFDme"},
		// Links inside the folder are followed.
		{`{"path":"link-in","num_chars":6}`, fmt.Sprintf("[link-in: characters 0–6 of %d; read on with start_char 6]\n# Plan", planLen)},
		{`{"path":"link-dir-in/plan.md","num_chars":6}`, fmt.Sprintf("[link-dir-in/plan.md: characters 0–6 of %d; read on with start_char 6]\n# Plan", planLen)},
		// Windows count characters, not bytes.
		{`{"path":"notes/plan.md","start_char":8,"num_chars":5}`, fmt.Sprintf("[notes/plan.md: characters 8–13 of %d; read on with start_char 13]\nGrüße", planLen)},
		{`{"path":"notes/plan.md","start_char":25,"num_chars":3}`, fmt.Sprintf("[notes/plan.md: characters 25–28 of %d; read on with start_char 28]\n日本語", planLen)},
		{fmt.Sprintf(`{"path":"notes/plan.md","start_char":%d}`, planLen-1), fmt.Sprintf("[notes/plan.md: characters %d–%d of %d]\n\n", planLen-1, planLen, planLen)},
		{fmt.Sprintf(`{"path":"notes/plan.md","start_char":%d,"num_chars":16000}`, planLen-11), fmt.Sprintf("[notes/plan.md: characters %d–%d of %d]\nLast line.\n", planLen-11, planLen, planLen)},
		// Folders are listed, folders first.
		{`{"path":"notes"}`, "[the folder notes: 3 entries; folders end with /]\nnotes/deep/\nnotes/plan.md\nnotes/sneaky"},
		{`{"path":"void"}`, "[the folder void is empty]"},
		{`{"path":"notes/deep/"}`, "[the folder notes/deep: 1 entries; folders end with /]\nnotes/deep/nested/"},
	}
	for _, tt := range tests {
		got, err := readFile(t, b, tt.args)
		if err != nil || got != tt.want {
			t.Errorf("read_file %s:\n got %q, %v\nwant %q", tt.args, got, err, tt.want)
		}
	}
	for _, args := range []string{`{"path":"."}`, `{"path":""}`, `{"path":"  "}`} {
		got, err := readFile(t, b, args)
		if err != nil || !strings.HasPrefix(got, "[the shared folder: 21 entries; folders end with /]\nlink-dir-in/\nnotes/\nvoid/\nbig.txt\n") {
			t.Errorf("read_file %s: %q, %v", args, got, err)
		}
	}
}

func TestReadFileRefuses(t *testing.T) {
	root := fileTree(t)
	b := readFileBox(t, Options{Files: FilesSettings{Root: root, MaxBytes: 1500}})
	tests := []struct {
		args string
		want string
	}{
		{`{"path":"../outside/secret.txt"}`, `"../outside/secret.txt" leads outside the shared folder`},
		{`{"path":"notes/../../outside/secret.txt"}`, `"notes/../../outside/secret.txt" leads outside the shared folder`},
		{`{"path":".."}`, `".." leads outside the shared folder`},
		{`{"path":"/etc/passwd"}`, `"/etc/passwd" is an absolute path: give a path inside the shared folder, such as notes/plan.md`},
		{fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "notes/plan.md")), `is an absolute path`},
		{`{"path":"link-out"}`, `"link-out" leads outside the shared folder`},
		{`{"path":"link-dir-out/secret.txt"}`, `"link-dir-out/secret.txt" leads outside the shared folder`},
		{`{"path":"link-dir-out"}`, `"link-dir-out" leads outside the shared folder`},
		{`{"path":"link-abs-out"}`, `"link-abs-out" leads outside the shared folder`},
		{`{"path":"notes/sneaky"}`, `"notes/sneaky" leads outside the shared folder`},
		// os.Root follows no absolute link, even one that stays inside.
		{`{"path":"link-abs-in"}`, `"link-abs-in" leads outside the shared folder`},
		{`{"path":"loop"}`, `"loop" is a loop of symbolic links`},
		{`{"path":"link-dangling"}`, `there is no file "link-dangling" in the shared folder (read "." to list it)`},
		{`{"path":"nope.md"}`, `there is no file "nope.md" in the shared folder`},
		{`{"path":"notes/plan.md/x"}`, `there is no file "notes/plan.md/x" in the shared folder`},
		{`{"path":"notes/plan.md\u0000.txt"}`, `the path contains a NUL character`},
		{`{"path":"fifo"}`, `"fifo" is not a regular file`},
		{`{"path":"big.txt"}`, `"big.txt" has 2.0 KB, more than tools.files.max_bytes (1.5 KB)`},
		{`{"path":"image.png"}`, `"image.png" is a binary file (image/png): read_file reads text, Markdown, source code, JSON and PDF`},
		{`{"path":"scanned.pdf"}`, `"scanned.pdf" is a PDF without text to extract (scanned pages are images)`},
		{`{"path":"broken.pdf"}`, `"broken.pdf" could not be read as a PDF: `},
		{`{"path":"notes/plan.md","start_char":48}`, `start_char 48 is past the end of "notes/plan.md", which has 44 characters`},
		{`{"path":"notes/plan.md","start_char":44}`, `start_char 44 is past the end of "notes/plan.md", which has 44 characters`},
		{`{"path":"empty.txt","start_char":1}`, `start_char 1 is past the end of "empty.txt", which has 0 characters`},
		{`{"path":"notes/plan.md","num_chars":0}`, `argument "num_chars" must be a whole number from 1 to 16000, not 0`},
		{`{"path":"notes/plan.md","num_chars":16001}`, `from 1 to 16000, not 16001`},
		{`{"path":"notes/plan.md","start_char":-1}`, `argument "start_char" must be a whole number of at least 0, not -1`},
		{`{"file":"notes/plan.md"}`, `unknown argument "file"`},
		{`{}`, `missing required argument "path"`},
	}
	for _, tt := range tests {
		got, err := readFile(t, b, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("read_file %s: %q, %v; want an error containing %q", tt.args, got, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), root) && !strings.Contains(tt.args, root) || strings.Contains(err.Error(), "the secret") {
			t.Errorf("read_file %s: the error shows the server's paths or what is outside: %v", tt.args, err)
		}
	}
	if utf8.RuneCountInString(planText) != 44 {
		t.Fatal("the cases above assume the plan has 44 characters")
	}
}

func TestReadFilePDF(t *testing.T) {
	root := fileTree(t)
	b := readFileBox(t, Options{Files: FilesSettings{Root: root}})
	got, err := readFile(t, b, `{"path":"report.pdf"}`)
	text := "[page 1]\nHello from koe.\nSecond line, café.\n\n[page 2]\nWord spacing by kerning.\nCourier keeps its widths."
	want := fmt.Sprintf("[report.pdf: characters 0–%d of %d]\n%s", utf8.RuneCountInString(text), utf8.RuneCountInString(text), text)
	if err != nil || got != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	// Windows page through the extracted text.
	got, err = readFile(t, b, `{"path":"report.pdf","start_char":9,"num_chars":15}`)
	if err != nil || got != fmt.Sprintf("[report.pdf: characters 9–24 of %d; read on with start_char 24]\nHello from koe.", utf8.RuneCountInString(text)) {
		t.Fatalf("window: %q, %v", got, err)
	}
	// A PDF of one page has no page marks.
	writeTree(t, root, map[string]string{"one.pdf": string(pdftest.Minimal(true, "Only (one) page, ½ of it."))})
	got, err = readFile(t, b, `{"path":"one.pdf"}`)
	if err != nil || got != "[one.pdf: characters 0–25 of 25]\nOnly (one) page, ½ of it." {
		t.Fatalf("one page: %q, %v", got, err)
	}
}

// Extraction stops between pages once the call's time is up.
func TestPDFTextHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := pdfText(ctx, "report.pdf", reportPDF())
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

// The result fits tools.max_result_chars without the box cutting it: the
// window shrinks and the header says so.
func TestReadFileWindowFitsTheResultLimit(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("0123456789", 3000)
	writeTree(t, root, map[string]string{"long.txt": long})
	for _, limit := range []int{200, 1000, 16000, 40000} {
		b := readFileBox(t, Options{MaxResultChars: limit, Files: FilesSettings{Root: root}})
		got, err := readFile(t, b, `{"path":"long.txt"}`)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, "[result cut") || utf8.RuneCountInString(got) > limit {
			t.Errorf("limit %d: the result has %d characters or was cut", limit, utf8.RuneCountInString(got))
		}
		window := min(MaxReadChars, limit-190)
		header := fmt.Sprintf("[long.txt: characters 0–%d of 30000; read on with start_char %d]\n", window, window)
		if !strings.HasPrefix(got, header) || len(got) != len(header)+window {
			t.Errorf("limit %d: got %q…", limit, clip(got))
		}
	}
}

func TestReadFileListLimit(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"a": "", "b": "", "c": "", "d/e": ""})
	b := readFileBox(t, Options{Files: FilesSettings{Root: root, MaxEntries: 2}})
	got, err := readFile(t, b, `{"path":"."}`)
	if err != nil || !strings.HasPrefix(got, "[the shared folder: its first 2 entries (tools.files.max_entries); folders end with /]\n") ||
		strings.Count(got, "\n") != 2 {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestReadFileSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	writeTree(t, dir, map[string]string{"f.txt": "x"})
	for _, tt := range []struct {
		s    FilesSettings
		want string
	}{
		{FilesSettings{}, "tools.files.root is required: the folder read_file may read"},
		{FilesSettings{Root: filepath.Join(dir, "missing")}, "tools.files.root \"" + filepath.Join(dir, "missing") + "\": stat " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{FilesSettings{Root: file}, "tools.files.root \"" + file + "\" is not a directory"},
		{FilesSettings{Root: dir, MaxBytes: -1}, "tools.files.max_bytes -1 is negative (default 10485760)"},
		{FilesSettings{Root: dir, MaxEntries: -1}, "tools.files.max_entries -1 is negative (default 1000)"},
	} {
		_, err := New([]string{"read_file"}, Options{Files: tt.s})
		if err == nil || err.Error() != "tool read_file: "+tt.want {
			t.Errorf("%+v: %v, want %q", tt.s, err, tt.want)
		}
	}
	// A relative root is the server's working directory's.
	t.Chdir(dir)
	b := readFileBox(t, Options{Files: FilesSettings{Root: "."}})
	if got, err := readFile(t, b, `{"path":"f.txt"}`); err != nil || got != "[f.txt: characters 0–1 of 1]\nx" {
		t.Fatalf("relative root: %q, %v", got, err)
	}
}

// A FIFO put where a file was between Stat and open cannot hold the call:
// opening it does not wait for a writer.
func TestReadFileFIFOInPlaceOfAFile(t *testing.T) {
	root := fileTree(t)
	r := &fileReader{root: root, maxBytes: DefaultFilesMaxBytes, maxEntries: DefaultFilesMaxEntries, window: MaxReadChars}
	dir, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := r.readAll(dir, "fifo", "fifo")
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil || err.Error() != `"fifo" is not a regular file` {
			t.Fatalf("got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("opening a FIFO waited for a writer")
	}
}

// A page tree that holds itself (a broken or hostile file) is an error,
// not a call that spins where no ctx reaches it.
func TestPDFTextPageTreeLoop(t *testing.T) {
	good := string(reportPDF())
	// Same length, so the cross-reference offsets still hold.
	looped := strings.Replace(good, "/Kids [6 0 R 8 0 R]", "/Kids [2 0 R 8 0 R]", 1)
	if looped == good {
		t.Fatal("the test PDF's page tree is not where this test expects it")
	}
	errc := make(chan error, 1)
	go func() {
		_, err := pdfText(context.Background(), "loop.pdf", []byte(looped))
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil || err.Error() != `"loop.pdf" could not be read as a PDF: its page tree is too deep or loops` {
			t.Fatalf("got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the page tree's loop held the call")
	}
}
