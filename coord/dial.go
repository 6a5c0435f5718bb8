package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// dial connects to the Redis server at rawURL and checks that it answers.
func dial(ctx context.Context, rawURL string) (*redis.Client, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("coord: redis_url: %w", err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("coord: redis at %s: %w", opts.Addr, err)
	}
	return client, nil
}

// newInstanceID is a random id for one koe instance's part in Redis.
func newInstanceID() string {
	var id [6]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}
