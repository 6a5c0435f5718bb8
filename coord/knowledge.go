package coord

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"koe/internal/quote"
	"koe/knowledge"
)

// topicKnowledge is the Bus topic of document changes: "conf\ndocument"
// (conf "": anything may have changed).
const topicKnowledge = "knowledge"

// KnowledgeNews is knowledge.Peers on a Bus: each instance publishes the
// documents it changes, and every other instance drops what it derived
// from them. What the Bus may have lost (a lost subscription, a
// publication that failed) makes every instance read everything again.
type KnowledgeNews struct {
	bus   *Bus
	owned bool // NewKnowledgeNews made bus: Close closes it
	wait  time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	changed func(conf, docID string) // nil until Follow
	// early: news came before Follow, which then tells of everything.
	early bool
}

var _ knowledge.Peers = (*KnowledgeNews)(nil)

// KnowledgeNewsOn carries document changes on bus; call it before the
// knowledge service reads anything (news from then on is not missed, and
// news before Follow makes Follow tell of everything). The caller closes
// bus.
func KnowledgeNewsOn(bus *Bus, c Config, log *slog.Logger) *KnowledgeNews {
	if log == nil {
		log = slog.Default()
	}
	k := &KnowledgeNews{bus: bus, wait: c.Wait, log: log}
	bus.Handle(topicKnowledge, func(payload string) {
		conf, docID, ok := strings.Cut(payload, "\n")
		if !ok {
			k.log.Warn("knowledge: news that koe did not send; ignored", "payload", quote.Shorten(payload, 80))
			return
		}
		k.deliver(conf, docID)
	})
	bus.OnResync(func() {
		k.log.Info("knowledge: subscribed again to the other instances' changes; reading every knowledge base again")
		k.deliver("", "")
	})
	return k
}

// NewKnowledgeNews connects a Bus of its own to c.RedisURL and carries
// document changes on it; Close closes it.
func NewKnowledgeNews(ctx context.Context, c Config, log *slog.Logger) (*KnowledgeNews, error) {
	bus, err := NewBus(ctx, c, log)
	if err != nil {
		return nil, err
	}
	k := KnowledgeNewsOn(bus, c, log)
	k.owned = true
	bus.Start()
	return k, nil
}

// Announce implements knowledge.Peers, within coord.wait.
func (k *KnowledgeNews) Announce(ctx context.Context, conf, docID string) error {
	ctx, cancel := context.WithTimeout(ctx, k.wait)
	defer cancel()
	if err := k.bus.Publish(ctx, topicKnowledge, conf+"\n"+docID); err != nil {
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

// Close closes the Bus if it is its own.
func (k *KnowledgeNews) Close() error {
	if !k.owned {
		return nil
	}
	return k.bus.Close()
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
