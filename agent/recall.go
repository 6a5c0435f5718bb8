package agent

import (
	"context"
	"errors"
)

// Recaller finds what a character remembers that bears on a message:
// package recall, reached through conversation, which knows the character.
type Recaller interface {
	// Recall returns the memories block for q ("" = nothing relevant).
	// Its failure never fails a turn: the reply goes on without memories.
	Recall(ctx context.Context, q RecallQuery) (string, error)
}

// RecallQuery is what a turn asks its character's memory.
type RecallQuery struct {
	// HistoryUID is this conversation; Exclude lists its turns the
	// context holds word for word, which the block need not repeat.
	HistoryUID string
	Exclude    []int
	// Text is the user's message.
	Text string
	// Budget is the most tokens the block may take.
	Budget int
}

// DefaultRecallBudget is memory.recall_budget's default.
const DefaultRecallBudget = 1000

// recall asks the character's memory about the current turn's message.
// The turns the context holds raw are excluded: every turn of memory that
// no summary covers, the current one included. Turns only summarised (or
// whose summary fell out of the window) may come back word for word.
func (a *Agent) recall(ctx context.Context) string {
	if a.opts.Recall == nil || a.opts.RecallBudget <= 0 {
		return ""
	}
	a.mu.Lock()
	turns := splitTurns(a.msgs)
	covered := a.coveredLocked()
	q := RecallQuery{HistoryUID: a.thread.HistoryUID, Budget: a.opts.RecallBudget}
	for _, t := range turns {
		if !covered[t.Index] {
			q.Exclude = append(q.Exclude, t.Index)
		}
	}
	if n := len(turns); n > 0 && !turns[n-1].Complete() {
		q.Text = turns[n-1].Messages[0].Content
	}
	a.mu.Unlock()
	if q.Text == "" {
		return ""
	}
	block, err := a.opts.Recall.Recall(ctx, q)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			a.log.Warn("recall failed; the reply goes on without memories", "history_uid", q.HistoryUID, "err", err)
		}
		return ""
	}
	return block
}
