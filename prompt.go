package koe

import "fmt"

// Prompt names koe keeps per character.
const (
	PromptSystem   = "system"
	PromptReminder = "reminder"
)

// MaxPromptLen caps a stored prompt. Prompts are user-edited text that is
// sent with every request, so anything near this size is a mistake or abuse.
const MaxPromptLen = 64 << 10

// CheckPrompt refuses a prompt text too long to store.
func CheckPrompt(text string) error {
	if len(text) > MaxPromptLen {
		return fmt.Errorf("%d bytes, limit %d: %w", len(text), MaxPromptLen, ErrInvalidRecord)
	}
	return nil
}
