package pdftext

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"koe/internal/pdftext/pdftest"
)

// extractGuarded extracts data in a goroutine, so that a call the library
// holds fails the test instead of hanging it.
func extractGuarded(t *testing.T, data []byte) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Extract(context.Background(), data)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the library held the call") // a hang guard
		return nil
	}
}

// Numbers in a file's structure that the library would trust are refused
// first: a table of a trillion entries is an allocation the runtime dies
// of, an object stream in itself a recursion it dies of (no recover
// reaches either), and entries of no bytes or an object stream of a
// trillion objects are loops where no read happens and no context
// reaches.
func TestExtractRefusesStructureTheLibraryTrusts(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		says string
	}{
		{"a table subsection at object 10^12", pdftest.ClassicXref("1000000000000 1\n0000000000 00000 n \n"), "its cross-reference table numbers objects up to 1000000000001"},
		{"a stream of 10^10 objects", pdftest.StreamXref("/Size 10000000000 /W [1 2 1]", []byte{1, 0, 9, 0}), "its cross-reference stream claims 10000000000 objects"},
		{"a stream index at object 10^12", pdftest.StreamXref("/Size 3 /W [1 2 1] /Index [1000000000000 1]", []byte{1, 0, 9, 0}), "numbers objects up to"},
		{"entries of no bytes", pdftest.StreamXref("/Size 3 /W [0 0 0] /Index [0 1000000000]", nil), "entries of no bytes"},
		{"an object stream of 10^12 objects", pdftest.ObjectStream("/N 1000000000000", 7), "an object stream's /N"},
		{"an object stream whose count is elsewhere", pdftest.ObjectStream("/N 9 0 R", 7), "an object stream's /N"},
		{"an object stream in itself", pdftest.ObjectStreamInItself(), "an object stream is itself in an object stream"},
		{"a section that is its own Prev", pdftest.ClassicXref(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.data
			if tt.says == "" {
				// Same length: "/Size 3 /Root" becomes a Prev to itself.
				s := string(data)
				x := s[strings.LastIndex(s, "startxref\n")+len("startxref\n"):]
				x = x[:strings.IndexByte(x, '\n')]
				data = []byte(strings.Replace(s, "/Size 3 /Root 1 0 R", fmt.Sprintf("/Size 3 /Root 1 0 R /Prev %s", x), 1))
				tt.says = "its cross-reference sections loop"
			}
			err := extractGuarded(t, data)
			var u *UnreadableError
			if !errors.As(err, &u) || !strings.Contains(u.Reason, tt.says) {
				t.Fatalf("got %v, want a reason saying %q", err, tt.says)
			}
		})
	}
	// The same structures with sane numbers read as before: the checks
	// refuse only what no real file holds.
	if err := extractGuarded(t, pdftest.ObjectStream("/N 1", 1)); !errors.Is(err, ErrNoText) {
		t.Fatalf("a sane object stream: %v", err)
	}
	if err := extractGuarded(t, pdftest.StreamXref("/Size 3 /W [1 2 1]", []byte{0, 0, 0, 0, 1, 0, 9, 0, 1, 0, 58, 0})); !errors.Is(err, ErrNoText) {
		t.Fatalf("a sane cross-reference stream: %v", err)
	}
}
