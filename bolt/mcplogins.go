package bolt

import (
	"bytes"
	"context"
	"fmt"

	"go.etcd.io/bbolt"
)

// MCP servers' OAuth logins (the client koe registered, its tokens), by a
// key naming the server and its URL: a secret, never logged. The bucket is
// made with the first login, so a koe.db without MCP logins has none.

var bucketMCPLogins = []byte("mcp_logins")

// LoadMCPLogin returns the login kept under key, or nil.
func (s *Store) LoadMCPLogin(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var data []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bucketMCPLogins); b != nil {
			data = bytes.Clone(b.Get([]byte(key)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read an MCP login: %w", err)
	}
	return data, nil
}

// SaveMCPLogin keeps data under key, replacing what was there.
func (s *Store) SaveMCPLogin(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketMCPLogins)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), data)
	})
	if err != nil {
		return fmt.Errorf("store an MCP login: %w", err)
	}
	return nil
}

// DeleteMCPLogin forgets the login under key, if any.
func (s *Store) DeleteMCPLogin(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bucketMCPLogins); b != nil {
			return b.Delete([]byte(key))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove an MCP login: %w", err)
	}
	return nil
}
