package postgres

import "github.com/jackc/pgx/v5/pgxpool"

// PoolStat is the store's connection pool as it is now: connections by
// state, acquires and their waits (what koe exports as metrics).
func (s *Store) PoolStat() *pgxpool.Stat { return s.pool.Stat() }

// PoolStat is the knowledge index's connection pool as it is now.
func (k *KnowledgeIndex) PoolStat() *pgxpool.Stat { return k.pool.Stat() }
