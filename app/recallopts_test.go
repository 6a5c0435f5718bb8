package app

import (
	"io"
	"log/slog"
	"testing"

	"koe/agent"
	"koe/config"
	"koe/recall"
)

// TestRecallIndexesHistoriesAtOnceOnBolt: with the bolt store, the recall
// indexer saves several histories at the same time (their saves share a
// commit); with PostgreSQL it indexes one at a time, leaving the pool to
// the turns.
func TestRecallIndexesHistoriesAtOnceOnBolt(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tok := agent.NewTokenizer("")
	for _, c := range []struct {
		store string
		want  int
	}{{config.StoreBbolt, recall.IndexAtOnce}, {config.StorePostgres, 0}} {
		cfg := config.Default()
		cfg.Store = c.store
		if got := recallOptions(cfg, nil, tok, nil, log).IndexAtOnce; got != c.want {
			t.Errorf("store %q: recall indexes %d histories at once, want %d", c.store, got, c.want)
		}
	}
}
