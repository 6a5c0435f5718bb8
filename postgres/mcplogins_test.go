package postgres

import (
	"testing"

	"koe/history/historytest"
	"koe/testkit/pgtest"
)

func TestMCPLogins(t *testing.T) {
	dsn := pgtest.Schema(t)
	historytest.MCPLogins(t, openTest(t, dsn, nil), func() historytest.MCPLoginStore {
		return openTest(t, dsn, nil)
	})
}
