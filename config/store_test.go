package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/config"
)

// The store settings that can never work are refused at load, naming their
// key; the DSN comes from KOE_DATABASE_URL when set there.
func TestStoreSettings(t *testing.T) {
	load := func(t *testing.T, yaml string, env map[string]string) (config.Config, error) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "conf.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return config.Load(path, true, func(k string) string { return env[k] })
	}
	bad := map[string]string{
		"store: sqlite\n":                     "store \"sqlite\"",
		"store: postgres\n":                   "store_dsn",
		"store: postgres\nstore_dsn: \" \"\n": "KOE_DATABASE_URL",
		"store_timeout: 0s\n":                 "store_timeout",
		"store_timeout: -1s\n":                "store_timeout",
	}
	for yaml, want := range bad {
		if _, err := load(t, yaml, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want one naming %s", yaml, err, want)
		}
	}
	cfg, err := load(t, "store: postgres\nstore_dsn: postgres://file@127.0.0.1/koe\nstore_timeout: 3s\n",
		map[string]string{"KOE_DATABASE_URL": "postgres://env@127.0.0.1/koe"})
	if err != nil || cfg.Store != config.StorePostgres || cfg.StoreDSN != "postgres://env@127.0.0.1/koe" || cfg.StoreTimeout != 3*time.Second {
		t.Fatalf("postgres from the file and the env: %q %q %v, err %v", cfg.Store, cfg.StoreDSN, cfg.StoreTimeout, err)
	}
	cfg, err = load(t, "log_level: info\n", nil)
	if err != nil || cfg.Store != config.StoreBbolt || cfg.StoreTimeout != 10*time.Second {
		t.Fatalf("defaults: %q %v, err %v", cfg.Store, cfg.StoreTimeout, err)
	}
}
