package app

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"koe/metrics"
)

// pooled is a store with a PostgreSQL connection pool (store: postgres,
// knowledge.store: postgres).
type pooled interface{ PoolStat() *pgxpool.Stat }

// watchPools exports the PostgreSQL pools koe opened (none with bbolt and
// the local or memory knowledge store) as metrics.
func (m *Main) watchPools() {
	for _, p := range []struct {
		name string
		of   any
	}{{"store", m.store}, {"knowledge", m.index}} {
		if pool, ok := p.of.(pooled); ok {
			m.metrics.WatchPool(p.name, func() metrics.PoolStat { return pool.PoolStat() })
		}
	}
}
