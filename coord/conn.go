package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// conn is what coord's Redis parts each have: a client, a subscription,
// and goroutines of theirs that run until close.
type conn struct {
	client *redis.Client
	sub    *redis.PubSub

	ctx       context.Context // ends at close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// connect dials the Redis server at rawURL, checks that it answers, and
// subscribes to channels, returning once each is confirmed: what is
// published on them from then on is received.
func connect(ctx context.Context, rawURL string, channels ...string) (*conn, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("coord.redis_url: %w", err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("coord: redis at %s: %w", opts.Addr, err)
	}
	sub := client.Subscribe(ctx, channels...)
	for confirmed := 0; confirmed < len(channels); {
		m, err := sub.Receive(ctx)
		if err != nil {
			_ = sub.Close()
			_ = client.Close()
			return nil, fmt.Errorf("coord: subscribe at redis %s: %w", opts.Addr, err)
		}
		if _, ok := m.(*redis.Subscription); ok {
			confirmed++
		}
	}
	c := &conn{client: client, sub: sub}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// receive passes, in a goroutine of c's and in order until close, each
// message to onMsg, and to onSub each confirmation that go-redis
// subscribed again after a lost connection (what was published meanwhile
// was lost).
func (c *conn) receive(onSub func(*redis.Subscription), onMsg func(*redis.Message)) {
	ch := c.sub.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			select {
			case <-c.ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				switch m := m.(type) {
				case *redis.Subscription:
					onSub(m)
				case *redis.Message:
					onMsg(m)
				}
			}
		}
	}()
}

// close runs first (unless nil), ends c's goroutines and closes the
// subscription and the client. Calling it again returns what the first
// call did.
func (c *conn) close(first func()) error { return c.closeThen(first, nil) }

// closeThen is close, calling last once the goroutines have stopped and
// before the client closes: the place for a last command that none of
// them may undo.
func (c *conn) closeThen(first, last func()) error {
	c.closeOnce.Do(func() {
		if first != nil {
			first()
		}
		c.cancel()
		err := c.sub.Close()
		c.wg.Wait()
		if last != nil {
			last()
		}
		if cerr := c.client.Close(); err == nil {
			err = cerr
		}
		c.closeErr = err
	})
	return c.closeErr
}

// newInstanceID is a random id for one koe instance's part in Redis.
func newInstanceID() string {
	var id [6]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}
