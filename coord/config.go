// Package coord shares the coordination of turns between koe instances
// that serve the same histories: one running turn per history, and stop
// requests that reach the instance running the turn. The coordinator is
// conversation.Coordinator; without a shared one (coord.backend: memory)
// each process coordinates its own sessions.
package coord

import (
	"fmt"
	"net/url"
	"time"
)

// Backends of coord.
const (
	Memory = "memory"
	Redis  = "redis"
)

// EnvRedisURL overrides coord.redis_url.
const EnvRedisURL = "KOE_REDIS_URL"

// Config is the coord section of the configuration file. (Before the
// section existed its keys sat at the top level, as coord, redis_url,
// coord.lease, coord.wait and coord.relay_queue; config still reads them.)
type Config struct {
	// Backend is memory (this process only) or redis (shared).
	Backend string `yaml:"backend"`
	// RedisURL is the Redis server for backend redis (env KOE_REDIS_URL
	// overrides it): redis://[user:password@]host:port[/db], or rediss://
	// for TLS.
	RedisURL string `yaml:"redis_url"`
	// Lease is how long a turn's hold on its history lasts unless it is
	// renewed (every third of it while the turn runs): how long a history
	// stays blocked after an instance dies mid-turn.
	Lease time.Duration `yaml:"lease"`
	// Wait bounds how long a turn waits for a turn running in its
	// history on another instance to stop, and how long a stop request
	// waits for the turn to end.
	Wait time.Duration `yaml:"wait"`
	// RelayQueue bounds the frames waiting to be relayed to watchers on
	// other instances; past it, frames are dropped (and counted).
	RelayQueue int `yaml:"relay_queue"`
	// Heartbeat is how long an instance's heartbeat key lives unless it
	// is refreshed (every third of it): how soon after an instance dies
	// its turns' histories can be taken over, instead of coord.lease. One
	// longer than Lease is taken as Lease (files that set a short lease
	// before heartbeats existed still load).
	Heartbeat time.Duration `yaml:"heartbeat"`
	// PendingReleases bounds the releases of ended turns' leases that
	// failed while Redis was unreachable and are tried again once it
	// answers; past it, a lease is left to expire within coord.lease.
	PendingReleases int `yaml:"pending_releases"`
	// Name is this koe's instance name (the top-level key instance, which
	// app copies here): the live chat's election shows it, with the
	// coordinator's random id, as who leads. It is not a key of the
	// coord section.
	Name string `yaml:"-"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Backend: Memory, Lease: 10 * time.Second, Wait: 30 * time.Second, RelayQueue: 1024,
		Heartbeat: 2 * time.Second, PendingReleases: 10000}
}

// ApplyEnv applies the environment overrides; getenv may be nil.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if getenv == nil {
		return
	}
	if v := getenv(EnvRedisURL); v != "" {
		c.RedisURL = v
	}
}

// Validate reports settings that can never work.
func (c Config) Validate() error {
	switch c.Backend {
	case Memory:
	case Redis:
		if c.RedisURL == "" {
			return fmt.Errorf("coord.backend redis needs the Redis server's address: set coord.redis_url or %s (redis://host:6379)", EnvRedisURL)
		}
		if err := checkURL(c.RedisURL); err != nil {
			return err
		}
	default:
		return fmt.Errorf("coord.backend %q: use memory or redis", c.Backend)
	}
	if c.Lease < 300*time.Millisecond {
		return fmt.Errorf("coord.lease %s is too short (at least 300ms: it is renewed every third of it)", c.Lease)
	}
	if c.Wait <= 0 {
		return fmt.Errorf("coord.wait %s must be positive", c.Wait)
	}
	if c.Heartbeat < 300*time.Millisecond {
		return fmt.Errorf("coord.heartbeat %s is too short (at least 300ms: it is refreshed every third of it)", c.Heartbeat)
	}
	if c.PendingReleases < 1 {
		return fmt.Errorf("coord.pending_releases %d must be at least 1 (releases kept to retry once Redis answers again)", c.PendingReleases)
	}
	if c.RelayQueue < 1 {
		return fmt.Errorf("coord.relay_queue %d must be at least 1 (frames waiting to reach other instances' watchers)", c.RelayQueue)
	}
	return nil
}

// checkURL refuses what is not a Redis URL, without echoing a password.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("coord.redis_url (or %s) is not a URL; write redis://host:6379", EnvRedisURL)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("coord.redis_url (or %s) scheme %q: use redis:// or rediss://", EnvRedisURL, u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("coord.redis_url (or %s) has no host; write redis://host:6379", EnvRedisURL)
	}
	return nil
}
