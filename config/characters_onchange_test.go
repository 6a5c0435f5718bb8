package config_test

import (
	"os"
	"path/filepath"
	"testing"
)

// OnChange hears of a character file that is new, edited or gone (the MCP
// servers' roots follow it), and not of a file read again unchanged.
func TestCharactersOnChange(t *testing.T) {
	c, chars := setup(t, baseConf, map[string]string{"zed.yaml": "conf_name: Zed\nconf_uid: zed\n"}, nil)
	changes := 0
	c.OnChange(func() { changes++ })
	list := func() {
		t.Helper()
		if _, err := c.List(); err != nil {
			t.Fatal(err)
		}
	}
	list()
	if changes != 1 {
		t.Fatalf("first listing: %d changes, want 1 (a file read for the first time)", changes)
	}
	list()
	if _, err := c.Load("zed.yaml"); err != nil {
		t.Fatal(err)
	}
	if changes != 1 {
		t.Fatalf("listed and loaded again unchanged: %d changes, want 1", changes)
	}
	writeFile(t, chars, "zed.yaml", "conf_name: Zed again\nconf_uid: zed\n")
	list()
	if changes != 2 {
		t.Fatalf("edited: %d changes, want 2", changes)
	}
	if err := os.Remove(filepath.Join(chars, "zed.yaml")); err != nil {
		t.Fatal(err)
	}
	list()
	if changes != 3 {
		t.Fatalf("removed: %d changes, want 3", changes)
	}
}
