package koe_test

import (
	"errors"
	"testing"

	"koe"
)

func TestCheckPages(t *testing.T) {
	for _, pages := range [][]int{nil, {0}, {0, 3, 3, 5}, {5}} {
		if err := koe.CheckPages("hello", pages); err != nil {
			t.Errorf("pages %v: %v", pages, err)
		}
	}
	for want, pages := range map[string][]int{
		"page 1 starts at -1, outside the text or before the page above: invalid record": {-1},
		"page 2 starts at 6, outside the text or before the page above: invalid record":  {0, 6},
		"page 3 starts at 2, outside the text or before the page above: invalid record":  {0, 3, 2},
	} {
		err := koe.CheckPages("hello", pages)
		if !errors.Is(err, koe.ErrInvalidRecord) || err.Error() != want {
			t.Errorf("pages %v: %v, want %s", pages, err, want)
		}
	}
}
