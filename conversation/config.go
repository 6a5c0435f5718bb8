package conversation

import (
	"fmt"
	"time"

	"koe"
	"koe/agent"
	"koe/asr"
	"koe/protocol"
	"koe/tools"
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
	// sessions; 0 means twice the cores koe may use (GOMAXPROCS), right for a local
	// engine. Raise it for a remote engine that scales.
	SpeechSlots int `yaml:"speech_slots"`
	// FasterFirstResponse speaks the first piece of a reply as soon as it
	// reaches a comma, instead of waiting for the end of the sentence.
	FasterFirstResponse bool `yaml:"faster_first_response"`
	// FirstPieceMaxWords, if > 0, also cuts the first piece after this many
	// words when no mark came yet (0 = off).
	FirstPieceMaxWords int `yaml:"first_piece_max_words"`

	// MaxPieceChars cuts a piece that reaches this many characters without
	// a sentence end (at the last space before it), so an LLM that never
	// ends a sentence still gets spoken and cannot grow a piece forever.
	MaxPieceChars int `yaml:"max_piece_chars"`
	// HistoryMessages is how many of a history's newest messages
	// history-data carries; older ones are paged with fetch-history-page.
	// It also bounds a page.
	HistoryMessages int `yaml:"history_messages"`

	// MaxImages and MaxImageBytes bound the images of one message.
	MaxImages     int `yaml:"max_images"`
	MaxImageBytes int `yaml:"max_image_bytes"`
	// MaxUtterance bounds one recorded utterance.
	MaxUtterance time.Duration `yaml:"max_utterance"`
	// ProactivePrompt is what the AI is told on ai-speak-signal;
	// {idle_time} is the seconds the user has been quiet.
	ProactivePrompt string `yaml:"proactive_prompt"`
	// VAD tunes the server-side voice activity detection of raw-audio-data.
	VAD VADConfig `yaml:"vad"`
	// OnAirBytes bounds the audio of one reply kept, as sent, for the
	// watchers that join while it plays (the pieces not yet played); one
	// that joins a reply that needs more gets its start and what is sent
	// after it joined. 0 keeps none.
	OnAirBytes int `yaml:"on_air_bytes"`
	// Groups bound the groups of clients (group.go).
	Groups GroupsConfig `yaml:"groups"`
}

// VADConfig tunes how a continuous microphone stream is cut into
// utterances.
type VADConfig struct {
	StartMillis   int `yaml:"start_ms"`    // speech must last this long to count
	HangMillis    int `yaml:"hang_ms"`     // silence this long ends an utterance
	PreRollMillis int `yaml:"pre_roll_ms"` // audio kept from before the detected start
}

func (v VADConfig) segmenter(maxUtterance time.Duration) asr.SegmenterConfig {
	return asr.SegmenterConfig{
		FrameMillis:   20,
		StartMillis:   v.StartMillis,
		HangMillis:    v.HangMillis,
		PreRollMillis: v.PreRollMillis,
		MaxMillis:     int(maxUtterance.Milliseconds()),
	}
}

// defaultProactivePrompt asks for a short, natural re-engagement.
const defaultProactivePrompt = "(The user has been quiet for {idle_time} seconds. Say one short, friendly thing to them on your own, like a friend would; do not mention that they were quiet.)"

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		PlaybackTimeout:     20 * time.Second,
		SpeechConcurrency:   3,
		FasterFirstResponse: true,
		MaxPieceChars:       400,
		HistoryMessages:     200,
		MaxImages:           4,
		MaxImageBytes:       5 << 20,
		MaxUtterance:        60 * time.Second,
		ProactivePrompt:     defaultProactivePrompt,
		VAD:                 VADConfig{StartMillis: 100, HangMillis: 600, PreRollMillis: 200},
		OnAirBytes:          DefaultOnAirBytes,
		Groups:              DefaultGroupsConfig(),
	}
}

// DefaultOnAirBytes is about a minute of 24 kHz speech, as sent.
const DefaultOnAirBytes = 4 << 20

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
	if c.MaxImages < 0 || c.MaxImageBytes < 1024 {
		return fmt.Errorf("conversation.max_images must not be negative and max_image_bytes must be at least 1024")
	}
	if c.MaxUtterance < time.Second || c.MaxUtterance > 10*time.Minute {
		return fmt.Errorf("conversation.max_utterance must be between 1s and 10m, got %s", c.MaxUtterance)
	}
	if c.VAD.StartMillis < 20 || c.VAD.HangMillis < 100 || c.VAD.PreRollMillis < 0 {
		return fmt.Errorf("conversation.vad needs start_ms >= 20, hang_ms >= 100 and pre_roll_ms >= 0")
	}
	if c.MaxPieceChars != 0 && c.MaxPieceChars < 40 {
		return fmt.Errorf("conversation.max_piece_chars must be 0 (off) or at least 40, got %d", c.MaxPieceChars)
	}
	if c.HistoryMessages < 1 || c.HistoryMessages > 10000 {
		return fmt.Errorf("conversation.history_messages must be between 1 and 10000, got %d", c.HistoryMessages)
	}
	if c.FirstPieceMaxWords < 0 {
		return fmt.Errorf("conversation.first_piece_max_words must not be negative, got %d", c.FirstPieceMaxWords)
	}
	if err := c.Groups.Validate(); err != nil {
		return err
	}
	if c.OnAirBytes < 0 {
		return fmt.Errorf("conversation.on_air_bytes must not be negative (0 keeps nothing for watchers that join mid-reply), got %d", c.OnAirBytes)
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
	Tools     tools.Config       `yaml:"tools"`
	// Overlay is how the OBS overlay (/overlay) shows the character.
	Overlay OverlayConfig `yaml:"overlay"`
	// PersonaPromptFrom, if set, makes an MCP server's prompt the
	// persona, got for each new session; Persona stands in while the
	// server is not connected (mcp_prompts.go).
	PersonaPromptFrom *protocol.MCPPromptRef `yaml:"persona_prompt_from"`
}

// Validate reports settings that can never work.
func (c Character) Validate() error {
	if !koe.ValidID(c.ConfUID) {
		return fmt.Errorf("character %q: conf_uid %q must be 1-128 characters of letters, digits, '_', '-' or '.'", c.ConfName, c.ConfUID)
	}
	if c.ConfUID == GroupConf {
		return fmt.Errorf("character %q: conf_uid %q is koe's own: the groups' records are kept under it; choose another", c.ConfName, c.ConfUID)
	}
	if err := c.LLM.Validate(); err != nil {
		return fmt.Errorf("character %q: %w", c.ConfName, err)
	}
	if err := c.Memory.Validate(); err != nil {
		return fmt.Errorf("character %q: %w", c.ConfName, err)
	}
	if c.Memory.Recall && c.Memory.RecallBudget > c.LLM.ContextWindow/2 {
		return fmt.Errorf("character %q: memory.recall_budget %d is more than half of llm.context_window %d: lower it, or raise the window", c.ConfName, c.Memory.RecallBudget, c.LLM.ContextWindow)
	}
	if err := c.TTS.Validate(); err != nil {
		return fmt.Errorf("character %q: tts: %w", c.ConfName, err)
	}
	if err := c.Tools.Validate(); err != nil {
		return fmt.Errorf("character %q: %w", c.ConfName, err)
	}
	if err := c.validatePersonaPrompt(); err != nil {
		return fmt.Errorf("character %q: %w", c.ConfName, err)
	}
	if err := c.Overlay.Avatar.validate(c.ModelInfo); err != nil {
		return fmt.Errorf("character %q: %w", c.ConfName, err)
	}
	return nil
}
