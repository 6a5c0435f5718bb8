package conversation

import (
	"fmt"
	"runtime"
	"time"

	"koe/agent"
	"koe/history"
	"koe/tts"
)

// Config holds the turn settings shared by every session.
type Config struct {
	// PlaybackTimeout bounds the wait for frontend-playback-complete after
	// backend-synth-complete. OLV waits forever; a client that never
	// answers (a plain text client, a crashed tab) must not hang the turn.
	// The wait is this long plus the duration of the audio sent.
	PlaybackTimeout time.Duration `yaml:"playback_timeout"`
	// SpeechConcurrency bounds the syntheses one turn runs at once.
	SpeechConcurrency int `yaml:"speech_concurrency"`
	// SpeechSlots bounds the syntheses running at once across all
	// sessions; 0 means twice the number of CPU cores, right for a local
	// engine. Raise it for a remote engine that scales.
	SpeechSlots int `yaml:"speech_slots"`
	// FasterFirstResponse speaks the first piece of a reply as soon as it
	// reaches a comma, instead of waiting for the end of the sentence.
	FasterFirstResponse bool `yaml:"faster_first_response"`
	// FirstPieceMaxWords, if > 0, also cuts the first piece after this many
	// words when no mark came yet (0 = off).
	FirstPieceMaxWords int `yaml:"first_piece_max_words"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{PlaybackTimeout: 20 * time.Second, SpeechConcurrency: 3, FasterFirstResponse: true}
}

// Slots returns the server-wide synthesis limiter these settings ask for.
func (c Config) Slots() *SpeechSlots {
	n := c.SpeechSlots
	if n == 0 {
		n = 2 * runtime.NumCPU()
	}
	return NewSpeechSlots(n)
}

// Validate reports settings that can never work.
func (c Config) Validate() error {
	if c.PlaybackTimeout <= 0 {
		return fmt.Errorf("conversation.playback_timeout must be positive, got %s", c.PlaybackTimeout)
	}
	if c.SpeechConcurrency < 1 || c.SpeechConcurrency > 32 {
		return fmt.Errorf("conversation.speech_concurrency must be between 1 and 32, got %d", c.SpeechConcurrency)
	}
	if c.SpeechSlots < 0 {
		return fmt.Errorf("conversation.speech_slots must not be negative, got %d", c.SpeechSlots)
	}
	if c.FirstPieceMaxWords < 0 {
		return fmt.Errorf("conversation.first_piece_max_words must not be negative, got %d", c.FirstPieceMaxWords)
	}
	return nil
}

// Character is one persona: who speaks, how it looks, which LLM it uses.
type Character struct {
	ConfName  string             `yaml:"conf_name"`
	ConfUID   string             `yaml:"conf_uid"`
	Name      string             `yaml:"character_name"`
	HumanName string             `yaml:"human_name"`
	Avatar    string             `yaml:"avatar"`
	Persona   string             `yaml:"persona_prompt"`
	ModelInfo map[string]any     `yaml:"model_info"`
	LLM       agent.Config       `yaml:"llm"`
	Memory    agent.MemoryConfig `yaml:"memory"`
	TTS       tts.Config         `yaml:"tts"`
}

// Validate reports settings that can never work.
func (c Character) Validate() error {
	if !history.ValidID(c.ConfUID) {
		return fmt.Errorf("character %q: conf_uid %q must be 1-128 characters of letters, digits, '_', '-' or '.'", c.ConfName, c.ConfUID)
	}
	if err := c.LLM.Validate(); err != nil {
		return fmt.Errorf("character %q: %w", c.ConfName, err)
	}
	if err := c.Memory.Validate(); err != nil {
		return fmt.Errorf("character %q: %w", c.ConfName, err)
	}
	if err := c.TTS.Validate(); err != nil {
		return fmt.Errorf("character %q: tts: %w", c.ConfName, err)
	}
	return nil
}
