package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"koe/internal/quote"
	"koe/knowledge"
)

// chKnowledge carries "instance\nconf\ndocument": an instance changed a
// character's document (conf "": anything may have changed).
const chKnowledge = "koe:knowledge:changed"

// KnowledgeNews is knowledge.Peers through Redis: each instance publishes
// the documents it changes, and every other instance, subscribed, drops
// what it derived from them. A publication that fails is made good when
// the connection is back: the others are then told that anything may
// have changed. Messages lost while an instance was not subscribed are
// made good the same way: when it subscribes again, it reads everything
// again.
type KnowledgeNews struct {
	client   *redis.Client
	sub      *redis.PubSub
	instance string
	wait     time.Duration
	log      *slog.Logger

	ctx       context.Context // ends at Close: the subscriber
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	changed func(conf, docID string) // nil until Follow
	// early: news came before Follow, which then tells of everything.
	early bool
	// missed: a publication of this instance failed.
	missed bool
}

var _ knowledge.Peers = (*KnowledgeNews)(nil)

// NewKnowledgeNews connects to c.RedisURL and subscribes to the news of
// knowledge changes. It fails if Redis cannot be reached now.
func NewKnowledgeNews(ctx context.Context, c Config, log *slog.Logger) (*KnowledgeNews, error) {
	if log == nil {
		log = slog.Default()
	}
	opts, err := redis.ParseURL(c.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("coord: redis_url: %w", err)
	}
	client := redis.NewClient(opts)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("coord: redis at %s: %w", opts.Addr, err)
	}
	sub := client.Subscribe(ctx, chKnowledge)
	for confirmed := false; !confirmed; {
		m, err := sub.Receive(ctx)
		if err != nil {
			_ = sub.Close()
			_ = client.Close()
			return nil, fmt.Errorf("coord: subscribe at redis %s: %w", opts.Addr, err)
		}
		_, confirmed = m.(*redis.Subscription)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	k := &KnowledgeNews{
		client: client, sub: sub, instance: hex.EncodeToString(id[:]), wait: c.Wait,
		log: log.With("coord_instance", hex.EncodeToString(id[:])),
	}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	k.wg.Add(1)
	go k.listen()
	return k, nil
}

// Announce implements knowledge.Peers, within coord_wait. When it fails,
// the other instances are told to read everything again once this one is
// connected again.
func (k *KnowledgeNews) Announce(ctx context.Context, conf, docID string) error {
	ctx, cancel := context.WithTimeout(ctx, k.wait)
	defer cancel()
	if err := k.client.Publish(ctx, chKnowledge, k.instance+"\n"+conf+"\n"+docID).Err(); err != nil {
		k.mu.Lock()
		k.missed = true
		k.mu.Unlock()
		return fmt.Errorf("coord: announce a knowledge change: %w", err)
	}
	return nil
}

// Follow implements knowledge.Peers.
func (k *KnowledgeNews) Follow(changed func(conf, docID string)) {
	k.mu.Lock()
	k.changed = changed
	early := k.early
	k.early = false
	k.mu.Unlock()
	if early {
		changed("", "")
	}
}

// Close stops listening and closes the connection.
func (k *KnowledgeNews) Close() error {
	k.closeOnce.Do(func() {
		k.cancel()
		err := k.sub.Close()
		k.wg.Wait()
		if cerr := k.client.Close(); err == nil {
			err = cerr
		}
		k.closeErr = err
	})
	return k.closeErr
}

// listen passes the others' news on. go-redis reconnects and subscribes
// again after a connection loss; news published meanwhile is lost, so
// each confirmation after the first tells of everything, and publishes
// what this instance failed to.
func (k *KnowledgeNews) listen() {
	defer k.wg.Done()
	ch := k.sub.ChannelWithSubscriptions()
	for {
		select {
		case <-k.ctx.Done():
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
				k.log.Info("knowledge: subscribed again to the other instances' changes; reading every knowledge base again")
				k.republish()
				k.deliver("", "")
			case *redis.Message:
				instance, rest, ok1 := strings.Cut(m.Payload, "\n")
				conf, docID, ok2 := strings.Cut(rest, "\n")
				switch {
				case !ok1 || !ok2:
					k.log.Warn("knowledge: a message on "+chKnowledge+" that koe did not send; ignored", "payload", quote.Shorten(m.Payload, 80))
				case instance != k.instance:
					k.deliver(conf, docID)
				}
			}
		}
	}
}

// republish tells the others of everything when a publication of this
// instance failed.
func (k *KnowledgeNews) republish() {
	k.mu.Lock()
	missed := k.missed
	k.missed = false
	k.mu.Unlock()
	if !missed {
		return
	}
	if err := k.Announce(k.ctx, "", ""); err != nil {
		k.log.Warn("knowledge: could not tell the other instances to read everything again; trying again at the next connection", "err", err)
		return
	}
	k.log.Info("knowledge: told the other instances to read everything again, a change of this instance having not reached them")
}

func (k *KnowledgeNews) deliver(conf, docID string) {
	k.mu.Lock()
	changed := k.changed
	if changed == nil {
		k.early = true
	}
	k.mu.Unlock()
	if changed == nil {
		k.log.Debug("knowledge: news before the knowledge service follows it; it reads everything again when it does", "conf_uid", conf, "doc_id", docID)
		return
	}
	changed(conf, docID)
}
