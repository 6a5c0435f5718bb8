package conversation

import (
	"fmt"
	"time"

	"koe/agent"
	"koe/history"
)

// Config holds the turn settings shared by every session.
type Config struct {
	// PlaybackTimeout bounds the wait for frontend-playback-complete after
	// backend-synth-complete. OLV waits forever; a client that never
	// answers (a plain text client, a crashed tab) must not hang the turn.
	PlaybackTimeout time.Duration `yaml:"playback_timeout"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{PlaybackTimeout: 20 * time.Second}
}

// Validate reports settings that can never work.
func (c Config) Validate() error {
	if c.PlaybackTimeout <= 0 {
		return fmt.Errorf("conversation.playback_timeout must be positive, got %s", c.PlaybackTimeout)
	}
	return nil
}

// Character is one persona: who speaks, how it looks, which LLM it uses.
type Character struct {
	ConfName  string         `yaml:"conf_name"`
	ConfUID   string         `yaml:"conf_uid"`
	Name      string         `yaml:"character_name"`
	HumanName string         `yaml:"human_name"`
	Avatar    string         `yaml:"avatar"`
	Persona   string         `yaml:"persona_prompt"`
	ModelInfo map[string]any `yaml:"model_info"`
	LLM       agent.Config   `yaml:"llm"`
}

// Validate reports settings that can never work.
func (c Character) Validate() error {
	if !history.ValidID(c.ConfUID) {
		return fmt.Errorf("character %q: conf_uid %q must be 1-128 characters of letters, digits, '_', '-' or '.'", c.ConfName, c.ConfUID)
	}
	if err := c.LLM.Validate(); err != nil {
		return fmt.Errorf("character %q: %w", c.ConfName, err)
	}
	return nil
}
