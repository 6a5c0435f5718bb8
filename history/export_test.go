package history

import "github.com/jackc/pgx/v5/pgxpool"

// Pool is the store's connections, for tests that look below its methods.
func (s *PGStore) Pool() *pgxpool.Pool { return s.pool }

// PGStoreMigrations is the store's schema.
var PGStoreMigrations = pgStoreMigrations
