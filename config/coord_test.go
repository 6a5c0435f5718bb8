package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/coord"
)

// coord and its keys sit at the top level; KOE_REDIS_URL supplies the
// address; coord: redis without one is refused at load.
func TestLoadCoord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conf.yaml")
	if err := os.WriteFile(path, []byte("coord: redis\ncoord_lease: 4s\ncoord_wait: 1m\ncharacters_dir: "+filepath.Join(dir, "chars")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, true, func(k string) string {
		if k == coord.EnvRedisURL {
			return "redis://127.0.0.1:6379/2"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Coord; c.Backend != coord.Redis || c.RedisURL != "redis://127.0.0.1:6379/2" || c.Lease != 4*time.Second || c.Wait != time.Minute {
		t.Fatalf("coord settings %+v", c)
	}
	_, err = config.Load(path, true, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "KOE_REDIS_URL") {
		t.Fatalf("coord: redis without an address: %v", err)
	}
}
