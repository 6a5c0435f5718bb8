package recall

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"koe"
	"koe/internal/quote"
)

// Memories is the memories API (the routes under
// /api/characters/:conf_uid/memories): what a character's long-term
// memory holds, what a turn would recall from it, and forgetting, each
// request checked as a client's. Its errors are *koe.Errors worded for
// the client, or koe's own.
type Memories struct {
	svc  *Service
	opts MemoriesOptions
}

// MemoriesOptions describe the characters whose memories the API serves.
type MemoriesOptions struct {
	// Budget is a character's memory.recall_budget; ok is false when no
	// character has that conf_uid.
	Budget func(confUID string) (tokens int, ok bool)
	// A budget a request names is within MinBudget and MaxBudget;
	// DefaultBudget stands in for a character's own that is not (its
	// recall is off, and its budget unset).
	MinBudget, MaxBudget, DefaultBudget int
}

// NewMemories serves the memories of svc's characters.
func NewMemories(svc *Service, opts MemoriesOptions) *Memories {
	return &Memories{svc: svc, opts: opts}
}

// A listing of memories holds DefaultListing of them unless asked for
// another number, up to MaxListing.
const (
	DefaultListing = 50
	MaxListing     = 500
)

// Recollection is what a turn asking Query would recall: the block its
// model would read, and the memories in it.
type Recollection struct {
	ConfUID string `json:"conf_uid"`
	Query   string `json:"query"`
	Budget  int    `json:"budget"`
	Tokens  int    `json:"tokens"`
	// Indexed is how many messages the character's index holds; Vectors
	// says whether the vector ranking took part.
	Indexed  int      `json:"indexed"`
	Vectors  bool     `json:"vectors"`
	Block    string   `json:"block"`
	Memories []Memory `json:"memories"`
}

// Listing is a page of a character's memories, newest first.
type Listing struct {
	ConfUID string `json:"conf_uid"`
	Page
}

// budgetOf checks the character a request names and returns its recall
// budget.
func (m *Memories) budgetOf(conf string) (int, error) {
	if !koe.ValidID(conf) {
		return 0, fmt.Errorf("memories of %q: %w", quote.Shorten(conf, 80), koe.ErrInvalidID)
	}
	b, ok := m.opts.Budget(conf)
	if !ok {
		return 0, koe.Errorf(koe.NotFound, "no character has conf_uid %q", conf)
	}
	return b, nil
}

// Recall recalls what a turn of the character asking text would, through
// the same recall: a block of at most budget tokens (nil: the character's
// memory.recall_budget). The turn is none of its histories', so nothing
// is left out as already in context.
func (m *Memories) Recall(ctx context.Context, conf, text string, budget *int) (Recollection, error) {
	b, err := m.budgetOf(conf)
	if err != nil {
		return Recollection{}, err
	}
	if strings.TrimSpace(text) == "" {
		return Recollection{}, koe.Errorf(koe.Invalid, `"q" is empty: give the words to recall memories for, or leave q out to list the newest memories`)
	}
	o := m.opts
	if b < o.MinBudget || b > o.MaxBudget {
		b = o.DefaultBudget // recall is off for the character, and its budget unset
	}
	if budget != nil {
		if *budget < o.MinBudget || *budget > o.MaxBudget {
			return Recollection{}, koe.Errorf(koe.Invalid, "budget %d is out of range: %d to %d tokens (this character's memory.recall_budget is %d)",
				*budget, o.MinBudget, o.MaxBudget, b)
		}
		b = *budget
	}
	block, err := m.svc.Recall(ctx, Query{ConfUID: conf, Text: text, Budget: b})
	if err != nil {
		return Recollection{}, fmt.Errorf("recall memories of %q: %w", conf, err)
	}
	out := Recollection{ConfUID: conf, Query: text, Budget: b, Tokens: block.Tokens, Indexed: block.Indexed,
		Vectors: block.Vectors, Block: block.Text, Memories: block.Memories}
	if out.Memories == nil {
		out.Memories = []Memory{}
	}
	return out, nil
}

// List lists up to limit (0: DefaultListing) of a character's memories
// said before the cursor before ("": the newest), newest first, with the
// size of its index.
func (m *Memories) List(ctx context.Context, conf, before string, limit int) (Listing, error) {
	if _, err := m.budgetOf(conf); err != nil {
		return Listing{}, err
	}
	if limit == 0 {
		limit = DefaultListing
	}
	if limit < 1 || limit > MaxListing {
		return Listing{}, koe.Errorf(koe.Invalid, "limit %d is out of range: 1 to %d memories (default %d)", limit, MaxListing, DefaultListing)
	}
	p, err := m.svc.Newest(ctx, conf, before, limit)
	if errors.Is(err, ErrCursor) {
		return Listing{}, koe.Errorf(koe.Invalid, "before must be the next of an earlier listing")
	}
	if err != nil {
		return Listing{}, fmt.Errorf("list memories of %q: %w", conf, err)
	}
	return Listing{ConfUID: conf, Page: p}, nil
}

// Forget forgets one memory for good: it is never recalled again, even
// after the index is rebuilt. The history keeps the message.
func (m *Memories) Forget(ctx context.Context, conf, historyUID string, seq uint64) error {
	if _, err := m.budgetOf(conf); err != nil {
		return err
	}
	if seq == 0 {
		return koe.Errorf(koe.Invalid, "seq must be a message id: a whole number from 1")
	}
	ok, err := m.svc.Forget(ctx, conf, historyUID, seq)
	if err != nil {
		return fmt.Errorf("forget memory %d of history %q: %w", seq, historyUID, err)
	}
	if !ok {
		return koe.Errorf(koe.NotFound, "no memory has seq %d in that history (GET the memories to find them)", seq)
	}
	return nil
}

// ForgetConversation forgets for good every memory of one history, as
// Forget does one; the history stays, and what is said in it later is
// remembered. It returns how many memories went.
func (m *Memories) ForgetConversation(ctx context.Context, conf, historyUID string) (int, error) {
	if _, err := m.budgetOf(conf); err != nil {
		return 0, err
	}
	n, err := m.svc.ForgetConversation(ctx, conf, historyUID)
	if err != nil {
		return n, fmt.Errorf("forget the memories of history %q: %w", historyUID, err)
	}
	return n, nil
}

// ForgetEverything forgets for good every memory of a character.
func (m *Memories) ForgetEverything(ctx context.Context, conf string) (int, error) {
	if _, err := m.budgetOf(conf); err != nil {
		return 0, err
	}
	n, err := m.svc.ForgetEverything(ctx, conf)
	if err != nil {
		return n, fmt.Errorf("forget the memories of %q: %w", conf, err)
	}
	return n, nil
}
