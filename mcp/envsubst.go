package mcp

import (
	"fmt"
	"os"
	"strings"
)

// Secrets stay out of the YAML: a header's or an env variable's value may
// name variables of koe's environment as ${NAME}, replaced when the
// server is reached. "$${" is a literal "${"; a "$" elsewhere is itself.

// expandEnv replaces each ${NAME} in s with lookup(NAME); a variable that
// is not set is an error naming it, since an empty token would only be
// refused later as "Unauthorized", far from its cause.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			// "$${": the first "$" escapes the second.
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q has \"${\" without a closing \"}\" (write \"$${\" for a literal \"${\")", clip(s[i:], 40))
		}
		name := s[i+2 : i+end]
		if !isEnvName(name) {
			return "", fmt.Errorf("${%s} is not a variable name (letters, digits and _, not starting with a digit)", clip(name, 40))
		}
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

func isEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// expandValues expands every value of m, naming the key of a failure as
// prefix.key; nil stays nil.
func expandValues(prefix string, m map[string]string, lookup func(string) (string, bool)) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		e, err := expandEnv(v, lookup)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", prefix, k, err)
		}
		out[k] = e
	}
	return out, nil
}

// resolved is s with ${NAME} in its headers and env replaced from koe's
// environment.
func (s ServerConfig) resolved(name string) (ServerConfig, error) {
	return s.resolvedWith(name, os.LookupEnv)
}

func (s ServerConfig) resolvedWith(name string, lookup func(string) (string, bool)) (ServerConfig, error) {
	key := "mcp_servers." + name
	var err error
	if s.Headers, err = expandValues(key+".headers", s.Headers, lookup); err != nil {
		return s, err
	}
	if s.Env, err = expandValues(key+".env", s.Env, lookup); err != nil {
		return s, err
	}
	if s.OAuth.ClientSecret, err = expandEnv(s.OAuth.ClientSecret, lookup); err != nil {
		return s, fmt.Errorf("%s.oauth.client_secret: %w", key, err)
	}
	return s, nil
}
