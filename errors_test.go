package koe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"koe"
)

func TestErrorText(t *testing.T) {
	cause := errors.New("the coordination service did not answer")
	for _, tc := range []struct {
		err  *koe.Error
		want string
	}{
		{&koe.Error{Kind: koe.NotFound, Err: errors.New("no character has conf_uid \"x\"")}, `no character has conf_uid "x"`},
		{&koe.Error{Op: "attach a file", Kind: koe.Unavailable, Err: cause}, "attach a file: the coordination service did not answer"},
		{&koe.Error{Op: "attach a file", Kind: koe.Conflict}, "attach a file: conflict"},
		{&koe.Error{Kind: koe.Invalid}, "invalid request"},
		{&koe.Error{Kind: koe.Kind(42)}, "kind 42"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v.Error() = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestErrorKind(t *testing.T) {
	conflict := koe.Errorf(koe.Conflict, "history %q is busy: %w", "h1", context.DeadlineExceeded)
	if got := conflict.Error(); got != `history "h1" is busy: context deadline exceeded` {
		t.Errorf("Errorf text = %q", got)
	}
	if !errors.Is(conflict, context.DeadlineExceeded) {
		t.Error("Errorf's %w is not unwrapped")
	}
	wrapped := fmt.Errorf("attach: %w", conflict)
	for _, tc := range []struct {
		err  error
		want koe.Kind
	}{
		{conflict, koe.Conflict},
		{wrapped, koe.Conflict},
		{&koe.Error{Kind: koe.Unavailable, Err: wrapped}, koe.Unavailable}, // the outermost says
		{fmt.Errorf("read history: %w", koe.ErrNotFound), koe.NotFound},
		{koe.ErrInvalidID, koe.Invalid},
		{koe.ErrInvalidRecord, koe.Invalid},
		{koe.ErrMarkMoved, koe.Internal}, // between indexers, never a client's doing
		{errors.New("disk full"), koe.Internal},
		{nil, koe.Internal},
	} {
		if got := koe.ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	var ke *koe.Error
	if !errors.As(wrapped, &ke) || ke.Kind != koe.Conflict {
		t.Errorf("errors.As(%v) = %v", wrapped, ke)
	}
}
