package app

import (
	"log/slog"

	"koe/postgres"
)

// logSchema says where koe found the PostgreSQL store's schema: a schema
// newer than this koe, which it runs on because the newer koe only
// expanded it, is worth a line of its own in a rolling upgrade.
func logSchema(log *slog.Logger, pg *postgres.Store) {
	version, known, compat, applied := pg.Schema()
	if version > known {
		log.Info("koe keeps its data in PostgreSQL (store: postgres); its schema is newer than this koe knows, and compatible with it",
			"schema", version, "known", known, "compatible_from", compat)
		return
	}
	log.Info("koe keeps its data in PostgreSQL (store: postgres)", "schema", version, "applied", applied, "compatible_from", compat)
}
