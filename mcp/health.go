package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// pings pings a connected server every ping_interval, and reports on hung
// when one goes unanswered for the server's timeout: a process that
// still runs but no longer reads (stopped, deadlocked, stuck in a loop)
// would otherwise hold its tools' calls until each timed out, forever.
// stop ends the pinging and waits for it.
func (s *server) pings(ctx context.Context, session *sdk.ClientSession) (hung <-chan error, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := s.cfg.pingInterval()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.ping(ctx, session); err != nil {
				out <- err
				return
			}
		}
	}()
	return out, func() {
		cancel()
		<-done
	}
}

// ping returns an error only when the server did not answer in time; a
// server that answers with an error (one without ping) is alive, and a
// closed session is noticed by serve on its own.
func (s *server) ping(ctx context.Context, session *sdk.ClientSession) error {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.timeout())
	defer cancel()
	err := session.Ping(pctx, nil)
	if err == nil || ctx.Err() != nil {
		return nil
	}
	if errors.Is(pctx.Err(), context.DeadlineExceeded) {
		s.log.Warn("MCP server did not answer a ping; restarting it", "timeout", s.cfg.timeout())
		return fmt.Errorf("no answer to a ping within %s (mcp_servers.%s.timeout): the server hangs", s.cfg.timeout(), s.name)
	}
	s.log.Debug("MCP server's ping failed", "err", err)
	return nil
}
