package conversation

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"koe"
	"koe/agent"
	"koe/internal/quote"
	"koe/recall"
)

// The memories API: what a character's long-term memory holds, what a
// turn would recall from it, and forgetting. Package recall keeps it.

// A listing of memories holds DefaultMemoriesPage of them unless asked
// for another number, up to MaxMemoriesPage.
const (
	DefaultMemoriesPage = 50
	MaxMemoriesPage     = 500
)

// MemoryRecall is what a turn asking Query would recall: the block its
// model would read, and the memories in it.
type MemoryRecall struct {
	ConfUID string `json:"conf_uid"`
	Query   string `json:"query"`
	Budget  int    `json:"budget"`
	Tokens  int    `json:"tokens"`
	// Indexed is how many messages the character's index holds; Vectors
	// says whether the vector ranking took part.
	Indexed  int             `json:"indexed"`
	Vectors  bool            `json:"vectors"`
	Block    string          `json:"block"`
	Memories []recall.Memory `json:"memories"`
}

// MemoryList is a page of a character's memories, newest first.
type MemoryList struct {
	ConfUID string `json:"conf_uid"`
	recall.Page
}

// RecallRunning reports whether koe keeps long-term memory at all.
func (h *Hub) RecallRunning() bool { return h.deps.Recall != nil }

// memoriesOf is the character whose memories a request names.
func (h *Hub) memoriesOf(conf string) (Character, error) {
	if !koe.ValidID(conf) {
		return Character{}, fmt.Errorf("memories of %q: %w", quote.Shorten(conf, 80), koe.ErrInvalidID)
	}
	char, ok := h.deps.Characters.Find(conf)
	if !ok {
		return Character{}, koe.Errorf(koe.NotFound, "no character has conf_uid %q", conf)
	}
	if h.deps.Recall == nil {
		return Character{}, koe.Errorf(koe.Unavailable, "koe runs without long-term memory")
	}
	return char, nil
}

// RecallMemories recalls what a turn of the character asking text would,
// through the same recall: a block of at most budget tokens (nil: the
// character's memory.recall_budget). The turn is none of its histories',
// so nothing is left out as already in context.
func (h *Hub) RecallMemories(ctx context.Context, conf, text string, budget *int) (MemoryRecall, error) {
	char, err := h.memoriesOf(conf)
	if err != nil {
		return MemoryRecall{}, err
	}
	if strings.TrimSpace(text) == "" {
		return MemoryRecall{}, invalid(`"q" is empty: give the words to recall memories for, or leave q out to list the newest memories`)
	}
	b := char.Memory.RecallBudget
	if b < agent.MinRecallBudget || b > agent.MaxRecallBudget {
		b = agent.DefaultRecallBudget // recall is off for the character, and its budget unset
	}
	if budget != nil {
		if *budget < agent.MinRecallBudget || *budget > agent.MaxRecallBudget {
			return MemoryRecall{}, invalid("budget %d is out of range: %d to %d tokens (this character's memory.recall_budget is %d)",
				*budget, agent.MinRecallBudget, agent.MaxRecallBudget, b)
		}
		b = *budget
	}
	block, err := h.deps.Recall.Recall(ctx, recall.Query{ConfUID: conf, Text: text, Budget: b})
	if err != nil {
		return MemoryRecall{}, fmt.Errorf("recall memories of %q: %w", conf, err)
	}
	out := MemoryRecall{ConfUID: conf, Query: text, Budget: b, Tokens: block.Tokens, Indexed: block.Indexed,
		Vectors: block.Vectors, Block: block.Text, Memories: block.Memories}
	if out.Memories == nil {
		out.Memories = []recall.Memory{}
	}
	return out, nil
}

// Memories lists up to limit (0: DefaultMemoriesPage) of a character's
// memories said before the cursor before ("": the newest), newest first,
// with the size of its index.
func (h *Hub) Memories(ctx context.Context, conf, before string, limit int) (MemoryList, error) {
	if _, err := h.memoriesOf(conf); err != nil {
		return MemoryList{}, err
	}
	if limit == 0 {
		limit = DefaultMemoriesPage
	}
	if limit < 1 || limit > MaxMemoriesPage {
		return MemoryList{}, invalid("limit %d is out of range: 1 to %d memories (default %d)", limit, MaxMemoriesPage, DefaultMemoriesPage)
	}
	p, err := h.deps.Recall.Newest(ctx, conf, before, limit)
	if errors.Is(err, recall.ErrCursor) {
		return MemoryList{}, invalid("before must be the next of an earlier listing")
	}
	if err != nil {
		return MemoryList{}, fmt.Errorf("list memories of %q: %w", conf, err)
	}
	return MemoryList{ConfUID: conf, Page: p}, nil
}

// ForgetMemory forgets one memory for good: it is never recalled again,
// even after the index is rebuilt. The history keeps the message.
func (h *Hub) ForgetMemory(ctx context.Context, conf, historyUID string, seq uint64) error {
	if _, err := h.memoriesOf(conf); err != nil {
		return err
	}
	if seq == 0 {
		return invalid("seq must be a message id: a whole number from 1")
	}
	ok, err := h.deps.Recall.Forget(ctx, conf, historyUID, seq)
	if err != nil {
		return fmt.Errorf("forget memory %d of history %q: %w", seq, historyUID, err)
	}
	if !ok {
		return koe.Errorf(koe.NotFound, "no memory has seq %d in that history (GET the memories to find them)", seq)
	}
	return nil
}

// ForgetConversation forgets for good every memory of one history, as
// ForgetMemory does one; the history stays, and what is said in it later
// is remembered. It returns how many memories went.
func (h *Hub) ForgetConversation(ctx context.Context, conf, historyUID string) (int, error) {
	if _, err := h.memoriesOf(conf); err != nil {
		return 0, err
	}
	n, err := h.deps.Recall.ForgetConversation(ctx, conf, historyUID)
	if err != nil {
		return n, fmt.Errorf("forget the memories of history %q: %w", historyUID, err)
	}
	return n, nil
}

// ForgetEverything forgets for good every memory of a character.
func (h *Hub) ForgetEverything(ctx context.Context, conf string) (int, error) {
	if _, err := h.memoriesOf(conf); err != nil {
		return 0, err
	}
	n, err := h.deps.Recall.ForgetEverything(ctx, conf)
	if err != nil {
		return n, fmt.Errorf("forget the memories of %q: %w", conf, err)
	}
	return n, nil
}
