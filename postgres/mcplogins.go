package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MCP servers' OAuth logins (the client koe registered, its tokens), by a
// key naming the server and its URL: a secret, never logged. Every koe
// sharing the database shares them, as they share the MCP servers' config.

// LoadMCPLogin returns the login kept under key, or nil.
func (s *Store) LoadMCPLogin(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM koe_mcp_logins WHERE key = $1`, key).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read an MCP login: %w", s.pgErr(err))
	}
	return data, nil
}

// SaveMCPLogin keeps data under key, replacing what was there.
func (s *Store) SaveMCPLogin(ctx context.Context, key string, data []byte) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `
		INSERT INTO koe_mcp_logins (key, data) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET data = excluded.data, updated_at = now()`, key, data)
	if err != nil {
		return fmt.Errorf("store an MCP login: %w", s.pgErr(err))
	}
	return nil
}

// DeleteMCPLogin forgets the login under key, if any.
func (s *Store) DeleteMCPLogin(ctx context.Context, key string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `DELETE FROM koe_mcp_logins WHERE key = $1`, key); err != nil {
		return fmt.Errorf("remove an MCP login: %w", s.pgErr(err))
	}
	return nil
}
