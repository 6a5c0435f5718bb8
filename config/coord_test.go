package config_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/config"
	"koe/coord"
)

// recorded keeps what is logged through the default logger during a
// test; Load warns through it, as main installs its handler before
// reading the file.
type recorded struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorded) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorded) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorded) WithGroup(string) slog.Handler            { return r }

func (r *recorded) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

// warnings returns each warning's attributes as key=value text.
func (r *recorded) warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		if rec.Level != slog.LevelWarn {
			continue
		}
		var attrs []string
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key != "file" { // a temporary path
				attrs = append(attrs, a.String())
			}
			return true
		})
		out = append(out, strings.Join(attrs, " "))
	}
	return out
}

func captureLog(t *testing.T) *recorded {
	t.Helper()
	r := &recorded{}
	old := slog.Default()
	slog.SetDefault(slog.New(r))
	t.Cleanup(func() { slog.SetDefault(old) })
	return r
}

func redisEnv(k string) string {
	if k == coord.EnvRedisURL {
		return "redis://127.0.0.1:6379/2"
	}
	return ""
}

func wantCoord(t *testing.T, got coord.Config, url string) {
	t.Helper()
	want := coord.Config{Backend: coord.Redis, RedisURL: url, Lease: 4 * time.Second, Wait: time.Minute, RelayQueue: 16,
		Heartbeat: 2 * time.Second, PendingReleases: 10000}
	if got != want {
		t.Fatalf("coord settings %+v, want %+v", got, want)
	}
}

// The coord section holds the coordination keys; KOE_REDIS_URL overrides
// its address; backend redis without one is refused at load.
func TestLoadCoordSection(t *testing.T) {
	log := captureLog(t)
	dir := t.TempDir()
	path := writeFile(t, dir, "conf.yaml", "coord:\n  backend: redis\n  redis_url: redis://file:6379\n  lease: 4s\n  wait: 1m\n  relay_queue: 16\n")
	cfg, err := config.Load(path, true, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	wantCoord(t, cfg.Coord, "redis://file:6379")
	cfg, err = config.Load(path, true, redisEnv)
	if err != nil {
		t.Fatal(err)
	}
	wantCoord(t, cfg.Coord, "redis://127.0.0.1:6379/2")
	if w := log.warnings(); len(w) > 0 {
		t.Errorf("the new form was warned about: %q", w)
	}

	path = writeFile(t, dir, "bare.yaml", "coord:\n  backend: redis\n")
	_, err = config.Load(path, true, env(nil))
	if err == nil || !strings.Contains(err.Error(), "coord.redis_url or KOE_REDIS_URL") {
		t.Fatalf("backend redis without an address: %v", err)
	}
	path = writeFile(t, dir, "typo.yaml", "coord:\n  backend: redis\n  leese: 4s\n")
	_, err = config.Load(path, true, redisEnv)
	if err == nil || !strings.Contains(err.Error(), "typo.yaml line 3: unknown key coord.leese (did you mean lease?)") {
		t.Fatalf("a mistyped key in the section: %v", err)
	}
}

// Files written before the coord section keep working: the scalar
// `coord: redis` and the top-level redis_url, coord_lease, coord_wait and
// coord_relay_queue mean what they meant, and each is warned about at
// load, with its line and the key to write instead.
func TestLoadCoordOldKeys(t *testing.T) {
	log := captureLog(t)
	path := writeFile(t, t.TempDir(), "conf.yaml", `log_level: info
coord: redis
redis_url: redis://file:6379
coord_lease: 4s
coord_wait: 1m
coord_relay_queue: 16
`)
	cfg, err := config.Load(path, true, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	wantCoord(t, cfg.Coord, "redis://file:6379")
	want := []string{
		"line=2 old=coord: redis new=coord.backend",
		"line=3 old=redis_url new=coord.redis_url",
		"line=4 old=coord_lease new=coord.lease",
		"line=5 old=coord_wait new=coord.wait",
		"line=6 old=coord_relay_queue new=coord.relay_queue",
	}
	if got := log.warnings(); !slices.Equal(got, want) {
		t.Errorf("warnings:\n got %q\nwant %q", got, want)
	}

	// The env still overrides an old redis_url.
	cfg, err = config.Load(path, true, redisEnv)
	if err != nil {
		t.Fatal(err)
	}
	wantCoord(t, cfg.Coord, "redis://127.0.0.1:6379/2")
}

// Old keys mix with the new section, and without a coord key at all.
func TestLoadCoordOldKeysBesideSection(t *testing.T) {
	captureLog(t)
	dir := t.TempDir()
	for name, text := range map[string]string{
		"section first.yaml":  "coord:\n  backend: redis\n  relay_queue: 16\nredis_url: redis://file:6379\ncoord_lease: 4s\ncoord_wait: 1m\n",
		"old keys first.yaml": "coord_lease: 4s\ncoord_wait: 1m\ncoord_relay_queue: 16\nredis_url: redis://file:6379\ncoord:\n  backend: redis\n",
		"no coord key.yaml":   "redis_url: redis://file:6379\ncoord_lease: 4s\ncoord_wait: 1m\ncoord_relay_queue: 16\n",
		"empty section.yaml":  "coord:\nredis_url: redis://file:6379\ncoord_lease: 4s\ncoord_wait: 1m\ncoord_relay_queue: 16\n",
	} {
		cfg, err := config.Load(writeFile(t, dir, name, text), true, env(nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := coord.Config{Backend: coord.Redis, RedisURL: "redis://file:6379", Lease: 4 * time.Second, Wait: time.Minute, RelayQueue: 16,
			Heartbeat: 2 * time.Second, PendingReleases: 10000}
		if name == "no coord key.yaml" || name == "empty section.yaml" {
			want.Backend = coord.Memory
		}
		if cfg.Coord != want {
			t.Errorf("%s: coord settings %+v, want %+v", name, cfg.Coord, want)
		}
	}
}

// An old key is checked in its own name, and one key set both ways is
// refused rather than one silently winning.
func TestLoadCoordOldKeysRefused(t *testing.T) {
	captureLog(t)
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{"log_level: info\ncoord_lease: soon\n", `conf.yaml line 2: coord_lease: expected a duration such as 30s, 2m or 1h30m, got "soon"`},
		{"coord:\n  lease: 4s\ncoord_lease: 5s\n", "conf.yaml line 3: coord_lease is set twice: here, in its old place, and as coord.lease on line 2; keep coord.lease"},
		{"coord: redis\ncoord_relay_queue: [1]\n", "conf.yaml line 2: coord_relay_queue: expected a whole number, got a list"},
		{"coord: [redis]\ncoord_lease: 4s\n", "conf.yaml line 1: coord: expected a mapping of keys, got a list"},
		{"coord: etcd\n", `coord.backend "etcd": use memory or redis`},
	} {
		_, err := config.Load(writeFile(t, dir, "conf.yaml", c.text), true, env(nil))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.text, err, c.want)
		}
	}
}
