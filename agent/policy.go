package agent

import (
	"fmt"
)

// Memory policies.
const (
	// PolicySliding summarises every Every complete turns (default 3):
	// at turns 4, 7, 10, … the three turns before are summarised.
	PolicySliding = "sliding"
	// PolicyWindow summarises when the raw messages exceed MaxMessages,
	// keeping the newest KeepRecent raw, and keeps at most MaxSummaries.
	PolicyWindow = "window"
)

// MemoryConfig chooses how a character's conversation is kept in context.
type MemoryConfig struct {
	Policy string `yaml:"policy"`
	// Every is the sliding policy's turns per summary.
	Every int `yaml:"every"`
	// MaxMessages and KeepRecent drive the window policy.
	MaxMessages int `yaml:"max_messages"`
	KeepRecent  int `yaml:"keep_recent"`
	// MaxSummaries bounds the summaries in context (oldest go first);
	// 0 means all. The window policy's default is 3.
	MaxSummaries int `yaml:"max_summaries"`
	// CompressionRate is the summary length as a share of the original,
	// in [0.1, 0.5]; each session can change it at run time.
	CompressionRate float64 `yaml:"compression_rate"`
	// PersonaAsSystem puts the character's persona in place of the system
	// prompt instead of as a message right above the latest user message.
	PersonaAsSystem bool `yaml:"persona_as_system"`
	// Recall brings back, before each reply, what the character said and
	// heard in its other conversations (and in this one's summarised
	// past) that bears on the user's message, in at most RecallBudget
	// tokens.
	Recall       bool `yaml:"recall"`
	RecallBudget int  `yaml:"recall_budget"`
}

// DefaultMemoryConfig is the sliding policy of the product design.
func DefaultMemoryConfig() MemoryConfig {
	return MemoryConfig{Policy: PolicySliding, Every: 3, MaxMessages: 10, KeepRecent: 5, CompressionRate: 0.3,
		Recall: true, RecallBudget: DefaultRecallBudget}
}

// Recall budget bounds: a block needs room for its dated header and a
// line or two; past the upper bound it would crowd out the conversation.
const (
	MinRecallBudget = 50
	MaxRecallBudget = 32000
)

// Compression rate bounds.
const (
	MinCompressionRate = 0.1
	MaxCompressionRate = 0.5
)

// Validate reports settings that can never work.
func (c MemoryConfig) Validate() error {
	switch c.Policy {
	case PolicySliding:
		if c.Every < 1 {
			return fmt.Errorf("memory.every must be at least 1, got %d", c.Every)
		}
	case PolicyWindow:
		if c.MaxMessages < 2 || c.KeepRecent < 1 || c.KeepRecent >= c.MaxMessages {
			return fmt.Errorf("memory: the window policy needs 1 <= keep_recent < max_messages, got keep_recent %d, max_messages %d", c.KeepRecent, c.MaxMessages)
		}
	default:
		return fmt.Errorf("memory.policy %q is unknown: use %s or %s", c.Policy, PolicySliding, PolicyWindow)
	}
	if c.Recall && (c.RecallBudget < MinRecallBudget || c.RecallBudget > MaxRecallBudget) {
		return fmt.Errorf("memory.recall_budget %d is out of range: %d to %d tokens (default %d), or set memory.recall: false", c.RecallBudget, MinRecallBudget, MaxRecallBudget, DefaultRecallBudget)
	}
	if c.MaxSummaries < 0 {
		return fmt.Errorf("memory.max_summaries must not be negative, got %d", c.MaxSummaries)
	}
	return validCompressionRate(c.CompressionRate)
}

// validCompressionRate checks a rate against its bounds.
func validCompressionRate(r float64) error {
	if r < MinCompressionRate || r > MaxCompressionRate {
		return fmt.Errorf("compression rate %.2f is outside [%.1f, %.1f]", r, MinCompressionRate, MaxCompressionRate)
	}
	return nil
}

// policy is a MemoryConfig reduced to the parameters of the one code path
// both policies share.
type policy struct {
	triggerTurns    int // summarise this many raw turns once there are that many (0 = off)
	triggerMessages int // summarise when raw messages exceed this (0 = off)
	keepRecent      int // messages left raw when summarising by messages
	maxSummaries    int // summaries kept in context (0 = all)
}

func (c MemoryConfig) policy() policy {
	if c.Policy == PolicyWindow {
		max := c.MaxSummaries
		if max == 0 {
			max = 3
		}
		return policy{triggerMessages: c.MaxMessages, keepRecent: c.KeepRecent, maxSummaries: max}
	}
	return policy{triggerTurns: c.Every, maxSummaries: c.MaxSummaries}
}

// due returns the oldest raw turns that should be summarised now, or nil.
// raw holds the complete turns neither summarised nor being summarised,
// oldest first, and ends at a turn boundary.
func (p policy) due(raw []turn) []turn {
	if p.triggerTurns > 0 && len(raw) >= p.triggerTurns {
		return raw[:p.triggerTurns]
	}
	if p.triggerMessages > 0 {
		total := 0
		for _, t := range raw {
			total += len(t.Messages)
		}
		if total <= p.triggerMessages {
			return nil
		}
		// Keep whole turns from the newest until KeepRecent messages stay
		// raw; summarise everything older.
		kept, cut := 0, len(raw)
		for cut > 0 && kept < p.keepRecent {
			cut--
			kept += len(raw[cut].Messages)
		}
		if cut > 0 {
			return raw[:cut]
		}
	}
	return nil
}
