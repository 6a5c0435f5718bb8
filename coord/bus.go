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

// topicMissed is the Bus's own news: an instance's news did not go out,
// so everyone reads everything again.
const topicMissed = "*"

// Bus carries small news between the koe instances that share a store,
// through Redis pub/sub: a prompt saved, recall entries stored, a
// document added. Each instance keeps things read from the store in
// memory; news tells the others to read them again. An instance does not
// hear its own news.
//
// Pub/sub keeps nothing: news published while an instance was not
// subscribed is lost, so after go-redis subscribes again (a lost
// connection, a restarted Redis) every OnResync function is called, to
// read again whatever news may have been missed. News an instance could
// not publish is made good the same way: once it can publish again (at
// its next news, or when it subscribes again) it tells every instance to
// call its OnResync functions.
type Bus struct {
	*conn
	instance  string
	log       *slog.Logger
	startOnce sync.Once

	mu       sync.Mutex
	handlers map[string][]func(payload string)
	resyncs  []func()
	// missed: a publication failed; the others have not been told yet.
	missed bool
}

// NewBus connects to c.RedisURL and subscribes: news published from then
// on is heard once Start begins listening. Handlers are added with Handle
// and OnResync.
func NewBus(ctx context.Context, c Config, log *slog.Logger) (*Bus, error) {
	if log == nil {
		log = slog.Default()
	}
	cn, err := connect(ctx, c.RedisURL, chNews)
	if err != nil {
		return nil, fmt.Errorf("news: %w", err)
	}
	return &Bus{conn: cn, instance: newInstanceID(), log: log, handlers: map[string][]func(string){}}, nil
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

// Start begins listening, until Close.
func (b *Bus) Start() {
	b.startOnce.Do(func() { b.receive(b.onSubscribed, b.onMessage) })
}

// Publish tells the other instances news on topic. The topic must not
// contain a newline; the payload may. When it fails, the others are told
// to read everything again once this instance can publish.
func (b *Bus) Publish(ctx context.Context, topic, payload string) error {
	if strings.Contains(topic, "\n") || topic == topicMissed {
		return fmt.Errorf("news topic %q: not a topic", topic)
	}
	b.republish(ctx)
	if err := b.client.Publish(ctx, chNews, b.instance+"\n"+topic+"\n"+payload).Err(); err != nil {
		b.mu.Lock()
		b.missed = true
		b.mu.Unlock()
		return fmt.Errorf("news %s: %w", topic, err)
	}
	return nil
}

// republish tells everyone to read everything again, if news of this
// instance did not go out.
func (b *Bus) republish(ctx context.Context) {
	b.mu.Lock()
	missed := b.missed
	b.missed = false
	b.mu.Unlock()
	if !missed {
		return
	}
	if err := b.client.Publish(ctx, chNews, b.instance+"\n"+topicMissed+"\n").Err(); err != nil {
		b.mu.Lock()
		b.missed = true
		b.mu.Unlock()
		b.log.Warn("news: could not tell the other instances to read everything again; trying again later", "err", err)
		return
	}
	b.log.Info("news: told the other instances to read everything again, news of this instance having not reached them")
}

// resync calls every OnResync function.
func (b *Bus) resync() {
	b.mu.Lock()
	fns := append([]func(){}, b.resyncs...)
	b.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Close stops listening and closes the connection.
func (b *Bus) Close() error { return b.close(nil) }

// onSubscribed: go-redis subscribed again; news may have been lost.
func (b *Bus) onSubscribed(m *redis.Subscription) {
	if m.Kind != "subscribe" {
		return
	}
	b.log.Info("news: subscribed again; reading again what may have been missed")
	b.republish(b.ctx)
	b.resync()
}

// onMessage passes another instance's news to the handlers of its topic.
func (b *Bus) onMessage(m *redis.Message) {
	inst, rest, _ := strings.Cut(m.Payload, "\n")
	topic, payload, ok := strings.Cut(rest, "\n")
	if !ok || inst == b.instance {
		return
	}
	if topic == topicMissed {
		b.resync()
		return
	}
	b.mu.Lock()
	fns := b.handlers[topic]
	b.mu.Unlock()
	for _, fn := range fns {
		fn(payload)
	}
}
