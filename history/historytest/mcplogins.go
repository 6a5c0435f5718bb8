package historytest

import (
	"bytes"
	"context"
	"testing"
)

// MCPLoginStore is what a store offers mcp for its servers' OAuth logins.
type MCPLoginStore interface {
	LoadMCPLogin(ctx context.Context, key string) ([]byte, error)
	SaveMCPLogin(ctx context.Context, key string, data []byte) error
	DeleteMCPLogin(ctx context.Context, key string) error
}

// MCPLogins checks a store's MCP logins: none at first, one saved is read
// back byte for byte and replaced whole, keys apart, deleting twice is
// fine. reopen, when set, gives the same store anew (a restart).
func MCPLogins(t *testing.T, s MCPLoginStore, reopen func() MCPLoginStore) {
	ctx := context.Background()
	const a, b = "files https://mcp.example/mcp", "files https://other.example/mcp"
	if got, err := s.LoadMCPLogin(ctx, a); err != nil || got != nil {
		t.Fatalf("a login never saved = %q, %v; want nil, nil", got, err)
	}
	first, second := []byte(`{"token":{"access_token":"one"}}`), []byte(`{"token":{"access_token":"two","refresh_token":"r"}}`)
	for _, step := range []struct {
		key  string
		data []byte
	}{{a, first}, {b, first}, {a, second}} {
		if err := s.SaveMCPLogin(ctx, step.key, step.data); err != nil {
			t.Fatal(err)
		}
	}
	if reopen != nil {
		s = reopen()
	}
	for key, want := range map[string][]byte{a: second, b: first} {
		if got, err := s.LoadMCPLogin(ctx, key); err != nil || !bytes.Equal(got, want) {
			t.Errorf("login %q = %q, %v; want %q", key, got, err, want)
		}
	}
	for range 2 {
		if err := s.DeleteMCPLogin(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.LoadMCPLogin(ctx, a); err != nil || got != nil {
		t.Errorf("a deleted login = %q, %v", got, err)
	}
	if got, _ := s.LoadMCPLogin(ctx, b); !bytes.Equal(got, first) {
		t.Errorf("deleting one login changed another: %q", got)
	}
}
