package tools

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"koe/internal/quote"
)

const readFileName = "read_file"

// Defaults and bounds of read_file.
const (
	DefaultFilesMaxBytes   = 10 << 20
	DefaultFilesMaxEntries = 1000
	// MaxReadChars bounds the window one call returns, whatever the
	// model asks: a page of text it can take in and cite.
	MaxReadChars = 16000
	// sniffBytes is how much of a file decides whether it is text, as
	// git decides.
	sniffBytes = 8000
	// maxHeaderPathChars bounds the path quoted in a window's header.
	maxHeaderPathChars = 100
)

// FilesSettings are tools.files: the folder read_file may read.
type FilesSettings struct {
	// Root is the folder; nothing outside it is readable, through ..,
	// absolute paths or symbolic links. Required when read_file is
	// enabled.
	Root string `yaml:"root"`
	// MaxBytes bounds the size of a file read (0: DefaultFilesMaxBytes).
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxEntries bounds the entries a folder listing shows (0:
	// DefaultFilesMaxEntries).
	MaxEntries int `yaml:"max_entries"`
}

type readFileArgs struct {
	Path      string `json:"path"`
	StartChar int    `json:"start_char"`
	NumChars  int    `json:"num_chars"`
}

var readFileSchema = newSchema(map[string]property{
	"path": {
		Type: "string",
		Description: `The file's path relative to the shared folder, e.g. "notes/plan.md". ` +
			`A folder's path (or "." for the top) lists what it holds.`,
	},
	"start_char": integer(0, -1, "Where to start reading, in characters from the beginning (default 0); "+
		"use it to read the rest of a long file."),
	"num_chars": integer(1, MaxReadChars, fmt.Sprintf("How many characters to read (default and most: %d).", MaxReadChars)),
}, "path")

type fileReader struct {
	root       string
	maxBytes   int64
	maxEntries int
	// window is the most characters one result shows, header aside.
	window int
}

func newReadFile(opts Options) (tool, error) {
	s := opts.Files
	switch {
	case s.Root == "":
		return tool{}, errors.New("tools.files.root is required: the folder read_file may read")
	case s.MaxBytes < 0:
		return tool{}, fmt.Errorf("tools.files.max_bytes %d is negative (default %d)", s.MaxBytes, DefaultFilesMaxBytes)
	case s.MaxEntries < 0:
		return tool{}, fmt.Errorf("tools.files.max_entries %d is negative (default %d)", s.MaxEntries, DefaultFilesMaxEntries)
	}
	root, err := filepath.Abs(s.Root)
	if err != nil {
		return tool{}, fmt.Errorf("tools.files.root %q: %w", s.Root, err)
	}
	info, err := os.Stat(root)
	if err != nil {
		return tool{}, fmt.Errorf("tools.files.root %q: %w", s.Root, err)
	}
	if !info.IsDir() {
		return tool{}, fmt.Errorf("tools.files.root %q is not a directory", s.Root)
	}
	r := &fileReader{
		root:       root,
		maxBytes:   cmp.Or(s.MaxBytes, DefaultFilesMaxBytes),
		maxEntries: cmp.Or(s.MaxEntries, DefaultFilesMaxEntries),
		// The header takes a line: the path, four numbers and a hint.
		window: max(1, min(MaxReadChars, opts.MaxResultChars-maxHeaderPathChars-90)),
	}
	return tool{
		spec: agentSpec(readFileName,
			"Reads a text, Markdown, source code, JSON or PDF file from the folder shared with you, "+
				fmt.Sprintf("up to %d characters at a time; the first line of the result says which characters you got ", r.window)+
				"out of how many, so you can read on with start_char. Reading a folder lists its files.",
			readFileSchema),
		run: func(ctx context.Context, args string) (string, error) {
			var a readFileArgs
			if err := readFileSchema.decode(args, &a); err != nil {
				return "", err
			}
			return r.read(ctx, a)
		},
	}, nil
}

// read answers one call. Every open goes through an os.Root of the
// folder, which resolves each step of a path inside it: no .., symbolic
// link or rename during the call can take an open outside.
func (r *fileReader) read(ctx context.Context, a readFileArgs) (string, error) {
	name, err := localPath(a.Path)
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(r.root)
	if err != nil {
		return "", fmt.Errorf("the shared folder cannot be opened: %v", pathReason(err))
	}
	defer root.Close()
	info, err := root.Stat(name)
	if err != nil {
		return "", openError(a.Path, err)
	}
	if info.IsDir() {
		return r.list(root, name)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%q is not a regular file", clip(a.Path))
	}
	if info.Size() > r.maxBytes {
		return "", r.tooLarge(a.Path, info.Size())
	}
	data, err := r.readAll(root, name, a.Path)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", ctxError(err)
	}
	text, err := fileText(ctx, a.Path, data)
	if err != nil {
		return "", err
	}
	return r.excerpt(name, text, a.StartChar, a.NumChars)
}

// localPath checks a path the model wrote and makes it one os.Root takes.
func localPath(p string) (string, error) {
	switch {
	case strings.ContainsRune(p, 0):
		return "", errors.New("the path contains a NUL character")
	case strings.TrimSpace(p) == "":
		return ".", nil
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return "", fmt.Errorf("%q is an absolute path: give a path inside the shared folder, such as notes/plan.md", clip(p))
	case !filepath.IsLocal(p):
		return "", fmt.Errorf("%q leads outside the shared folder", clip(p))
	}
	return filepath.Clean(p), nil
}

// openError says why a path cannot be read, without the server's paths.
func openError(p string, err error) error {
	switch reason := pathReason(err); {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return &toolError{msg: fmt.Sprintf("there is no file %q in the shared folder (read \".\" to list it)", clip(p)), cause: err}
	case errors.Is(err, fs.ErrPermission):
		return &toolError{msg: fmt.Sprintf("%q may not be read (permission denied)", clip(p)), cause: err}
	case errors.Is(err, syscall.ELOOP):
		return &toolError{msg: fmt.Sprintf("%q is a loop of symbolic links", clip(p)), cause: err}
	case strings.Contains(reason, "escapes"):
		// os.Root's answer for a symbolic link out of the folder, or an
		// absolute one, which it does not follow even inside.
		return &toolError{msg: fmt.Sprintf("%q leads outside the shared folder", clip(p)), cause: err}
	default:
		return &toolError{msg: fmt.Sprintf("%q cannot be read: %s", clip(p), reason), cause: err}
	}
}

// pathReason is an os error without the operation and the path.
func pathReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func (r *fileReader) tooLarge(p string, size int64) error {
	return fmt.Errorf("%q has %s, more than tools.files.max_bytes (%s)", clip(p), quote.Bytes(size), quote.Bytes(r.maxBytes))
}

func (r *fileReader) readAll(root *os.Root, name, p string) ([]byte, error) {
	// Non-blocking, so that a FIFO put in place of the file since Stat
	// cannot hold the call in open.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(p, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, openError(p, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", clip(p))
	}
	data, err := io.ReadAll(io.LimitReader(f, r.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%q cannot be read: %s", clip(p), pathReason(err))
	}
	if int64(len(data)) > r.maxBytes {
		// It grew since Stat.
		return nil, r.tooLarge(p, int64(len(data)))
	}
	return data, nil
}

// fileText is a file's text: a PDF's extracted, a text file's own. Other
// files are an error naming their kind.
func fileText(ctx context.Context, p string, data []byte) (string, error) {
	if bytes.HasPrefix(data, []byte("%PDF-")) {
		return pdfText(ctx, p, data)
	}
	if bytes.IndexByte(data[:min(len(data), sniffBytes)], 0) >= 0 {
		kind, _, _ := strings.Cut(http.DetectContentType(data), ";")
		return "", fmt.Errorf("%q is a binary file (%s): read_file reads text, Markdown, source code, JSON and PDF", clip(p), kind)
	}
	text := string(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	text = strings.ToValidUTF8(text, "\uFFFD")
	return strings.ReplaceAll(text, "\r\n", "\n"), nil
}

// excerpt returns the asked window of text under a header that says
// where it lies in the whole.
func (r *fileReader) excerpt(name, text string, start, num int) (string, error) {
	total := utf8.RuneCountInString(text)
	shown := clipTo(filepath.ToSlash(name), maxHeaderPathChars)
	if start > total || start == total && total > 0 {
		return "", fmt.Errorf("start_char %d is past the end of %q, which has %d characters", start, shown, total)
	}
	num = min(cmp.Or(num, r.window), r.window)
	end := min(start+num, total)
	// Byte offsets of the window, found in one pass over its start.
	from := runeOffset(text, 0, start)
	to := runeOffset(text, from, end-start)
	header := fmt.Sprintf("[%s: characters %d–%d of %d", shown, start, end, total)
	switch {
	case total == 0:
		header += "; the file is empty]"
	case end < total:
		header += fmt.Sprintf("; read on with start_char %d]", end)
	default:
		header += "]"
	}
	return header + "\n" + text[from:to], nil
}

// runeOffset is the byte offset n characters after byte offset from.
func runeOffset(s string, from, n int) int {
	i := from
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// list answers a folder's path with its entries, folders first.
func (r *fileReader) list(root *os.Root, name string) (string, error) {
	dir, err := root.Open(name)
	if err != nil {
		return "", openError(name, err)
	}
	defer dir.Close()
	entries, err := dir.ReadDir(r.maxEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("%q cannot be listed: %s", clip(name), pathReason(err))
	}
	more := len(entries) > r.maxEntries
	entries = entries[:min(len(entries), r.maxEntries)]
	type entry struct {
		name string
		dir  bool
	}
	list := make([]entry, len(entries))
	for i, e := range entries {
		list[i] = entry{e.Name(), e.IsDir()}
		if e.Type()&fs.ModeSymlink != 0 {
			// A link to a folder inside is a folder to the model; one
			// that leaves is listed, and refused when read.
			info, err := root.Stat(filepath.Join(name, e.Name()))
			list[i].dir = err == nil && info.IsDir()
		}
	}
	slices.SortFunc(list, func(x, y entry) int {
		if x.dir != y.dir {
			if x.dir {
				return -1
			}
			return 1
		}
		return strings.Compare(x.name, y.name)
	})
	folder := "the folder " + filepath.ToSlash(name)
	if name == "." {
		folder = "the shared folder"
	}
	var b strings.Builder
	switch {
	case len(list) == 0:
		fmt.Fprintf(&b, "[%s is empty]", folder)
	case more:
		fmt.Fprintf(&b, "[%s: its first %d entries (tools.files.max_entries); folders end with /]", folder, r.maxEntries)
	default:
		fmt.Fprintf(&b, "[%s: %d entries; folders end with /]", folder, len(list))
	}
	for _, e := range list {
		b.WriteString("\n")
		b.WriteString(filepath.ToSlash(filepath.Join(name, e.name)))
		if e.dir {
			b.WriteString("/")
		}
	}
	return b.String(), nil
}
