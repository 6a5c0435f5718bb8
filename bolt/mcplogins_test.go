package bolt

import (
	"testing"

	"koe/history/historytest"
)

func TestMCPLogins(t *testing.T) {
	s, path := openTest(t, Options{})
	historytest.MCPLogins(t, s, func() historytest.MCPLoginStore {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		again, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = again.Close() })
		return again
	})
}
