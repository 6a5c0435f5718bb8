package koe

import "fmt"

// SummaryRecord is one memory summary of consecutive turns of a history.
type SummaryRecord struct {
	ThreadID        string  `json:"thread_id"`   // the history uid
	Turns           []int   `json:"turns"`       // 1-based turn indices covered, ascending, consecutive, non-empty
	TurnLength      int     `json:"turn_length"` // len(Turns)
	OriginalChars   int     `json:"original_chars"`
	SummaryChars    int     `json:"summary_chars"`
	CompressionRate float64 `json:"compression_rate"`
	Summary         string  `json:"summary"`
	CreatedAt       string  `json:"created_at"` // TimestampLayout; stores fill it if empty
}

// Validate checks what makes a summary well formed by itself (that it
// belongs to the history it is stored in is for the store to check). A
// store runs it before any write, so that a bad summary stores nothing.
func (r SummaryRecord) Validate() error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("summary: %s: %w", fmt.Sprintf(format, args...), ErrInvalidRecord)
	}
	if len(r.Turns) == 0 {
		return invalid("no turns")
	}
	if r.TurnLength != len(r.Turns) {
		return invalid("turn_length %d, but %d turns", r.TurnLength, len(r.Turns))
	}
	for i, t := range r.Turns {
		// t >= 1 on every element also rules out prev+1 wrapping around.
		if t < 1 {
			return invalid("turn %d is not 1-based", t)
		}
		if i > 0 && t != r.Turns[i-1]+1 {
			return invalid("turns %d and %d are not consecutive", r.Turns[i-1], t)
		}
	}
	if r.OriginalChars < 0 || r.SummaryChars < 0 {
		return invalid("negative character count")
	}
	// Written so that NaN fails too.
	if !(r.CompressionRate >= 0 && r.CompressionRate <= 1) {
		return invalid("compression rate %v not in [0, 1]", r.CompressionRate)
	}
	return nil
}
