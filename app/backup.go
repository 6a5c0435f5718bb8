package app

import (
	"koe/bolt"
	"koe/server"
)

// backupOf is what serves koe backup for the store: koe.db's copy, made
// in one read transaction beside the running turns. PostgreSQL has none:
// pg_dump backs it up.
func backupOf(s appStore) server.Backup {
	if b, ok := s.(*bolt.Store); ok {
		return b
	}
	return nil
}
