package config

import (
	"fmt"
	"os"
)

// EnvInstance overrides instance.
const EnvInstance = "KOE_INSTANCE"

// maxInstanceLen bounds instance: it is on every log line and every
// metric's labels.
const maxInstanceLen = 64

// fallbackInstance names an instance whose host name cannot be read.
const fallbackInstance = "koe"

// InstanceName is the name a koe goes by in its log lines and metric
// labels when it is configured as set (instance, or KOE_INSTANCE): set
// itself, or else the machine's host name, which tells instances apart as
// long as each runs on a machine (or container) of its own.
func InstanceName(set string) string {
	if set != "" {
		return set
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return fallbackInstance
	}
	return host
}

// InstanceName is this configuration's instance name (see the function
// InstanceName).
func (c Config) InstanceName() string { return InstanceName(c.Instance) }

// checkInstance refuses an instance name that would garble a log line or
// a label: 1-64 letters, digits, '.', '-' or '_', as a host name is.
func checkInstance(name string) error {
	if name == "" {
		return nil // the host name
	}
	if len(name) > maxInstanceLen {
		return fmt.Errorf("instance %q is longer than %d characters (it names this koe on every log line and metric)", name, maxInstanceLen)
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
		default:
			return fmt.Errorf("instance %q: use letters, digits, '.', '-' and '_' only (it names this koe on every log line and metric)", name)
		}
	}
	return nil
}
