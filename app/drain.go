package app

import (
	"context"

	"koe/server"
)

// Drain is the first half of a graceful stop, before Close: koe takes no
// new session or turn (/readyz answers 503, clients are sent elsewhere
// with 1012) and lets the turns running on this instance finish, the live
// chat's included, for up to server.drain_timeout or until stop ends (a
// second signal). Close then stops what still runs, storing what was
// heard. With server.drain_timeout 0 it does nothing.
func (m *Main) Drain(stop context.Context) server.DrainResult {
	timeout := m.Config.Server.DrainTimeout
	if m.server == nil || timeout <= 0 {
		return server.DrainResult{}
	}
	ctx, cancel := context.WithTimeout(stop, timeout)
	defer cancel()
	// The live chat's turn ends beside the clients' (its watchers stay
	// connected until the drain ends); Close hands the chat over after.
	live := make(chan bool, 1)
	go func() { live <- m.liveChat.Drain(ctx) }()
	// So do the lines the scenes' characters are saying; no other begins.
	scenes := make(chan bool, 1)
	go func() { scenes <- m.scenes.Drain(ctx) }()
	res := m.server.Drain(ctx)
	if <-live {
		m.Logger.Info("drain: the live chat's turn ended, or is stopped now", "finished", ctx.Err() == nil)
	}
	if <-scenes {
		m.Logger.Info("drain: the scenes' lines ended, or are stopped now", "finished", ctx.Err() == nil)
	}
	return res
}
