package scene

import (
	"errors"
	"fmt"
	"time"
)

// Config is the scenes.* section: the bounds of what a streamer may ask
// of POST /api/scenes. Every scene holds a headless session per
// character and makes LLM calls back to back, so each bound is a cost.
type Config struct {
	// MaxCharacters is the most characters one scene may have (at least
	// two talk in any scene).
	MaxCharacters int `yaml:"max_characters"`
	// MaxRounds is the most rounds a scene may ask for (a round: each
	// character says one line).
	MaxRounds int `yaml:"max_rounds"`
	// DefaultRounds is a scene's rounds when it asks neither max_rounds
	// nor a duration.
	DefaultRounds int `yaml:"default_rounds"`
	// MaxDuration is the longest duration a scene may ask for.
	MaxDuration time.Duration `yaml:"max_duration"`
	// MaxRunning is how many scenes may run (or be paused) at once.
	MaxRunning int `yaml:"max_running"`
	// MaxTopicChars bounds a scene's topic.
	MaxTopicChars int `yaml:"max_topic_chars"`
	// MaxLines is how many of a scene's latest lines GET /api/scenes/{id}
	// shows (older ones stay in the characters' histories).
	MaxLines int `yaml:"max_lines"`
	// KeepEnded is how many ended scenes are still listed, newest first.
	KeepEnded int `yaml:"keep_ended"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxCharacters: 4,
		MaxRounds:     50,
		DefaultRounds: 5,
		MaxDuration:   2 * time.Hour,
		MaxRunning:    2,
		MaxTopicChars: 1000,
		MaxLines:      200,
		KeepEnded:     10,
	}
}

// Validate reports settings that can never work, naming the key.
func (c Config) Validate() error {
	var errs []error
	atLeast := func(key string, v, least int) {
		if v < least {
			errs = append(errs, fmt.Errorf("scenes.%s must be at least %d, got %d", key, least, v))
		}
	}
	atLeast("max_characters", c.MaxCharacters, 2)
	atLeast("max_rounds", c.MaxRounds, 1)
	atLeast("default_rounds", c.DefaultRounds, 1)
	atLeast("max_running", c.MaxRunning, 1)
	atLeast("max_topic_chars", c.MaxTopicChars, 1)
	atLeast("max_lines", c.MaxLines, 1)
	atLeast("keep_ended", c.KeepEnded, 0)
	if c.DefaultRounds > c.MaxRounds && c.MaxRounds >= 1 {
		errs = append(errs, fmt.Errorf("scenes.default_rounds (%d) must not be more than scenes.max_rounds (%d)", c.DefaultRounds, c.MaxRounds))
	}
	if c.MaxDuration < time.Second {
		errs = append(errs, fmt.Errorf("scenes.max_duration must be at least 1s, got %s", c.MaxDuration))
	}
	return errors.Join(errs...)
}
