package koe_test

import (
	"errors"
	"strings"
	"testing"

	"koe"
)

func TestCheckPrompt(t *testing.T) {
	if err := koe.CheckPrompt(strings.Repeat("x", koe.MaxPromptLen)); err != nil {
		t.Errorf("a prompt of MaxPromptLen bytes: %v", err)
	}
	err := koe.CheckPrompt(strings.Repeat("x", koe.MaxPromptLen+1))
	if !errors.Is(err, koe.ErrInvalidRecord) || err.Error() != "65537 bytes, limit 65536: invalid record" {
		t.Errorf("a prompt one byte too long: %v", err)
	}
}
