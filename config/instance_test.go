package config_test

import (
	"os"
	"strings"
	"testing"

	"koe/config"
)

// The instance's name: the file's, KOE_INSTANCE over it, and the host name
// when neither sets one; a name that would garble a log line or a label
// is refused naming the key.
func TestInstanceName(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skipf("no host name here: %v", err)
	}
	dir := t.TempDir()
	cfg, err := config.Load(writeFile(t, dir, "none.yaml", ""), true, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Instance != "" || cfg.InstanceName() != host {
		t.Errorf("no name set: instance %q, name %q; want \"\" and the host name %q", cfg.Instance, cfg.InstanceName(), host)
	}
	path := writeFile(t, dir, "named.yaml", "instance: koe-1\n")
	if cfg, err = config.Load(path, true, env(nil)); err != nil || cfg.InstanceName() != "koe-1" {
		t.Errorf("instance: koe-1 → %q, %v", cfg.InstanceName(), err)
	}
	if cfg, err = config.Load(path, true, env(map[string]string{config.EnvInstance: "eu-west.koe_2"})); err != nil || cfg.InstanceName() != "eu-west.koe_2" {
		t.Errorf("KOE_INSTANCE over the file → %q, %v", cfg.InstanceName(), err)
	}
	for _, bad := range []string{"koe 1", "koe\n1", `koe"1`, "ко", strings.Repeat("k", 65)} {
		_, err := config.Load(path, true, env(map[string]string{config.EnvInstance: bad}))
		if err == nil || !strings.Contains(err.Error(), "instance") {
			t.Errorf("KOE_INSTANCE=%q: error %v, want one naming instance", bad, err)
		}
	}
	if config.EnvInstance != "KOE_INSTANCE" {
		t.Errorf("EnvInstance = %s", config.EnvInstance)
	}
}
