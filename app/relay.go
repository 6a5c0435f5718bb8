package app

import (
	"context"
	"fmt"

	"koe/conversation"
	"koe/coord"
)

// openRelay connects the watch relay (coord: redis), so that watchers
// follow sessions of every instance.
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

// startRelay begins relaying to and from the hub's watchers.
func (m *Main) startRelay() error {
	if m.relay == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), coordOpenTimeout)
	defer cancel()
	if err := m.relay.Start(ctx, m.hub); err != nil {
		return fmt.Errorf("watchers across instances: %w", err)
	}
	m.Logger.Info("watchers follow sessions of every instance through redis", "relay_instance", m.relay.Instance())
	return nil
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
