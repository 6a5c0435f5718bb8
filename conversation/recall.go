package conversation

import (
	"context"

	"koe"
	"koe/agent"
	"koe/recall"
)

// Recall is the characters' long-term memory (package recall's Service):
// told of every record stored and every history deleted, asked before
// every reply.
type Recall interface {
	Noted(confUID, historyUID string)
	ForgetHistory(confUID, historyUID string)
	Recall(ctx context.Context, q recall.Query) (recall.Block, error)
}

// characterRecall is one character's memory as its agent asks it.
type characterRecall struct {
	r    Recall
	conf string
}

func (c characterRecall) Recall(ctx context.Context, q agent.RecallQuery) (string, error) {
	b, err := c.r.Recall(ctx, recall.Query{
		ConfUID: c.conf, HistoryUID: q.HistoryUID, Exclude: q.Exclude,
		Text: q.Text, Budget: q.Budget,
	})
	return b.Text, err
}

// recaller is the agent's view of a character's memory (nil: recall is
// off for it, or koe runs without one).
func (d *Deps) recaller(char Character) agent.Recaller {
	if d.Recall == nil || !char.Memory.Recall {
		return nil
	}
	return characterRecall{r: d.Recall, conf: char.ConfUID}
}

// noted tells recall a history has new records to index.
func (d *Deps) noted(conf, uid string) {
	if d.Recall != nil {
		d.Recall.Noted(conf, uid)
	}
}

// forgotten tells recall a history was deleted.
func (d *Deps) forgotten(conf, uid string) {
	if d.Recall != nil {
		d.Recall.ForgetHistory(conf, uid)
	}
}

// notingSummaries is the summary store an agent writes to: each summary
// stored is also a view recall indexes.
type notingSummaries struct {
	store HistoryStore
	deps  *Deps
}

func (n notingSummaries) AddSummary(ctx context.Context, conf, uid string, r koe.SummaryRecord) error {
	if err := n.store.AddSummary(ctx, conf, uid, r); err != nil {
		return err
	}
	n.deps.noted(conf, uid)
	return nil
}
