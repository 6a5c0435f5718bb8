package coord

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	redis := func(url string) Config {
		c := DefaultConfig()
		c.Backend, c.RedisURL = Redis, url
		return c
	}
	if err := redis("redis://127.0.0.1:6379/0").Validate(); err != nil {
		t.Fatalf("a redis URL: %v", err)
	}
	if err := redis("rediss://user:pw@redis.example.org:6380").Validate(); err != nil {
		t.Fatalf("a TLS redis URL: %v", err)
	}
	short := DefaultConfig()
	short.Lease = 100 * time.Millisecond
	noWait := DefaultConfig()
	noWait.Wait = 0
	noQueue := DefaultConfig()
	noQueue.RelayQueue = 0
	shortBeat := DefaultConfig()
	shortBeat.Heartbeat = 100 * time.Millisecond
	noPending := DefaultConfig()
	noPending.PendingReleases = 0
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Backend: "etcd", Lease: time.Second, Wait: time.Second}, `coord.backend "etcd": use memory or redis`},
		{redis(""), "set coord.redis_url or KOE_REDIS_URL"},
		{redis("http://127.0.0.1:6379"), `scheme "http": use redis:// or rediss://`},
		{redis("127.0.0.1:6379"), "write redis://host:6379"},
		{redis("redis://"), "has no host"},
		{redis("redis://:secret@h:6379\x7f"), "is not a URL"},
		{short, "coord.lease 100ms is too short"},
		{noWait, "coord.wait 0s must be positive"},
		{noQueue, "coord.relay_queue 0 must be at least 1"},
		{shortBeat, "coord.heartbeat 100ms is too short"},
		{noPending, "coord.pending_releases 0 must be at least 1"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

func TestConfigEnv(t *testing.T) {
	c := DefaultConfig()
	c.RedisURL = "redis://file:6379"
	c.ApplyEnv(func(k string) string {
		if k == EnvRedisURL {
			return "redis://env:6379"
		}
		return ""
	})
	if c.RedisURL != "redis://env:6379" {
		t.Fatalf("coord.redis_url %q, want the environment's", c.RedisURL)
	}
	c.ApplyEnv(func(string) string { return "" })
	if c.RedisURL != "redis://env:6379" {
		t.Fatal("an empty environment variable replaced coord.redis_url")
	}
	c.ApplyEnv(nil)
}
