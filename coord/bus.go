package coord

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// chNews carries the Bus's messages: "instance\ntopic\npayload".
const chNews = "koe:news"

// Bus carries small news between the koe instances that share a store,
// through Redis pub/sub: a prompt saved, recall entries stored, a
// document added. Each instance keeps things read from the store in
// memory; news tells the others to read them again. An instance does not
// hear its own news.
//
// Pub/sub keeps nothing: news published while an instance was not
// subscribed is lost, so after go-redis subscribes again (a lost
// connection, a restarted Redis) every OnResync function is called, to
// read again whatever news may have been missed.
type Bus struct {
	client   *redis.Client
	sub      *redis.PubSub
	instance string
	log      *slog.Logger

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error

	mu       sync.Mutex
	handlers map[string][]func(payload string)
	resyncs  []func()
}

// NewBus connects to c.RedisURL. Handlers are added with Handle and
// OnResync; Start begins listening.
func NewBus(ctx context.Context, c Config, log *slog.Logger) (*Bus, error) {
	if log == nil {
		log = slog.Default()
	}
	client, err := dial(ctx, c.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("news: %w", err)
	}
	b := &Bus{client: client, instance: newInstanceID(), log: log, handlers: map[string][]func(string){}}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// Handle calls fn with the payload of each news on topic from another
// instance, in the order published, in the Bus's goroutine: fn must not
// wait long.
func (b *Bus) Handle(topic string, fn func(payload string)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handlers[topic] = append(b.handlers[topic], fn)
}

// OnResync calls fn whenever the Bus subscribed again after a lost
// connection: news may have been missed meanwhile.
func (b *Bus) OnResync(fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resyncs = append(b.resyncs, fn)
}

// Start subscribes and listens until Close. It returns once subscribed.
func (b *Bus) Start(ctx context.Context) error {
	var err error
	b.startOnce.Do(func() {
		b.sub = b.client.Subscribe(ctx, chNews)
		if _, rerr := b.sub.Receive(ctx); rerr != nil {
			err = fmt.Errorf("news: subscribe: %w", rerr)
			return
		}
		b.wg.Add(1)
		go b.listen()
	})
	return err
}

// Publish tells the other instances news on topic. The topic must not
// contain a newline; the payload may.
func (b *Bus) Publish(ctx context.Context, topic, payload string) error {
	if strings.Contains(topic, "\n") {
		return fmt.Errorf("news topic %q has a newline", topic)
	}
	if err := b.client.Publish(ctx, chNews, b.instance+"\n"+topic+"\n"+payload).Err(); err != nil {
		return fmt.Errorf("news %s: %w", topic, err)
	}
	return nil
}

// Close stops listening and closes the connection.
func (b *Bus) Close() error {
	b.closeOnce.Do(func() {
		b.cancel()
		var err error
		if b.sub != nil {
			err = b.sub.Close()
		}
		b.wg.Wait()
		if cerr := b.client.Close(); err == nil {
			err = cerr
		}
		b.closeErr = err
	})
	return b.closeErr
}

func (b *Bus) listen() {
	defer b.wg.Done()
	ch := b.sub.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	for {
		select {
		case <-b.ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind != "subscribe" {
					continue
				}
				b.log.Info("news: subscribed again; reading again what may have been missed")
				b.mu.Lock()
				fns := append([]func(){}, b.resyncs...)
				b.mu.Unlock()
				for _, fn := range fns {
					fn()
				}
			case *redis.Message:
				inst, rest, _ := strings.Cut(m.Payload, "\n")
				topic, payload, ok := strings.Cut(rest, "\n")
				if !ok || inst == b.instance {
					continue
				}
				b.mu.Lock()
				fns := b.handlers[topic]
				b.mu.Unlock()
				for _, fn := range fns {
					fn(payload)
				}
			}
		}
	}
}
