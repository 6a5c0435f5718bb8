package app

import (
	"context"

	"koe/conversation"
	"koe/coord"
	"koe/histories"
)

// Instances that share a store and a Redis (coord: redis) keep each other
// up to date through it: the watch relay carries what sessions say to
// other instances' watchers, the bus news of changes that instances keep
// in memory (saved prompts, documents, recall's memories). The bus listens
// from the start; each part registers for its news before it reads
// anything from the store.

// openBus connects and subscribes the bus (coord: redis).
func (m *Main) openBus(c coord.Config) error {
	if c.Backend != coord.Redis {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), coordOpenTimeout)
	defer cancel()
	bus, err := coord.NewBus(ctx, c, m.Logger)
	if err != nil {
		return err
	}
	bus.Start()
	m.bus = bus
	return nil
}

// closeBus stops the news, if koe has them.
func (m *Main) closeBus() {
	if m.bus == nil {
		return
	}
	if err := m.bus.Close(); err != nil {
		m.Logger.Warn("coord: closing the news bus failed", "err", err)
	}
}

// openRelay connects the watch relay.
func (m *Main) openRelay(c coord.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), coordOpenTimeout)
	defer cancel()
	r, err := coord.NewWatchRelay(ctx, c, coord.RelayOptions{
		Logger: m.Logger,
		Dropped: func() {
			if m.metrics != nil {
				m.metrics.QueueDropped("watch_relay")
			}
		},
	})
	if err != nil {
		return err
	}
	m.relay = r
	return nil
}

// watchRelay is the relay for the hub, or nil (an interface holding a nil
// pointer would not be).
func (m *Main) watchRelay() conversation.WatchRelay {
	if m.relay == nil {
		return nil
	}
	return m.relay
}

// news is the bus for the histories' saved prompts, or nil.
func (m *Main) news() histories.News {
	if m.bus == nil {
		return nil
	}
	return m.bus
}

// startRelay begins relaying to and from the hub's watchers, and applies
// the other instances' saved prompts.
func (m *Main) startRelay() {
	if m.relay == nil {
		return
	}
	m.bus.Handle(histories.NewsPrompts, func(conf string) {
		m.hub.PromptsChanged(conf)
		m.Logger.Debug("prompts saved through another instance applied", "conf_uid", conf)
	})
	m.bus.OnResync(func() { m.hub.PromptsChanged("") })
	m.relay.Start(m.hub.Watchers())
	m.Logger.Info("watchers follow sessions of every instance through redis", "relay_instance", m.relay.Instance())
}

// closeRelay stops relaying, if koe relays.
func (m *Main) closeRelay() {
	if m.relay == nil {
		return
	}
	if err := m.relay.Close(); err != nil {
		m.Logger.Warn("coord: closing the watch relay failed", "err", err)
	}
}
