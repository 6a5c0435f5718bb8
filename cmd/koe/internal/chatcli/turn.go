package chatcli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"koe/client"
	"koe/protocol"
)

// spinnerInterval is how often a running task's spinner turns.
const spinnerInterval = 100 * time.Millisecond

// streamed is one item of a turn's stream.
type streamed struct {
	ev  client.Event
	err error
}

// stopped is what a stop request came back with.
type stopped struct {
	ok  bool
	err error
}

// turn sends one message and shows its events until the turn ends. The
// first Ctrl-C asks koe to stop the turn, which then ends as koe saw it,
// marked interrupted; a second one leaves the turn at once (closing the
// stream, which stops it too).
func (c *chat) turn(ctx context.Context, text string) {
	c.send(ctx, protocol.ChatRequest{Message: text})
}

// send runs a turn for req (its text, or an MCP prompt) in the chat's
// character and history, at its rate.
func (c *chat) send(ctx context.Context, req protocol.ChatRequest) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	req.ConfUID, req.HistoryUID, req.CompressionRate = c.conf, c.history, c.rate
	events := make(chan streamed)
	// A koe that restarts refuses the turn and the client sends it again
	// (client.WithRetry); the user hears of each try from this loop.
	retries := make(chan client.Retry)
	retryCtx := client.WithRetryTrace(ctx, func(r client.Retry) {
		select {
		case retries <- r:
		case <-ctx.Done():
		}
	})
	wg.Go(func() {
		defer close(events)
		for ev, err := range c.api.Stream(retryCtx, req) {
			select {
			case events <- streamed{ev, err}:
			case <-ctx.Done():
				return
			}
		}
	})

	var tick <-chan time.Time
	if c.term.Animate {
		t := time.NewTicker(spinnerInterval)
		defer t.Stop()
		tick = t.C
	}
	c.view.calls = nil
	var (
		stops       = make(chan stopped, 1)
		stopWanted  bool // Ctrl-C came
		stopSent    bool
		abandoned   bool
		retried     bool // koe refused the turn while restarting
		historyUID  = c.history
		sendStopNow = func() {
			stopSent = true
			wg.Go(func() {
				ok, err := c.api.Stop(ctx, historyUID)
				stops <- stopped{ok, err}
			})
		}
	)
	for {
		select {
		case item, open := <-events:
			if !open {
				c.view.show(client.Event{Type: protocol.EventEnd})
				c.drainInterrupts()
				return
			}
			if abandoned {
				continue
			}
			if item.err != nil {
				c.failed(item.err)
				continue
			}
			if retried {
				retried = false
				c.view.line(markReconnect + " reconnected")
			}
			if m := item.ev.Message; m != nil && m.Type == protocol.MessageHuman {
				if req.MCPPrompt != nil {
					c.say("%s%s", userPrompt, m.Content) // the prompt's text, which nobody typed
				}
				c.stored(m)
				historyUID = m.AdditionalKwargs.HistoryUID
				if stopWanted && !stopSent && historyUID != "" {
					sendStopNow()
				}
			}
			c.view.show(item.ev)
		case r := <-retries:
			retried = true
			c.view.line(fmt.Sprintf("%s koe is restarting: sending it again in %s (retry %d)", markReconnect, r.Wait, r.Attempt))
		case <-tick:
			c.view.tick()
		case <-c.term.Interrupts:
			switch {
			case abandoned:
			case stopWanted:
				abandoned = true
				cancel()
				c.view.line(markInterrupted + " left the turn")
			default:
				stopWanted = true
				// A new history's uid comes with the first event;
				// the stop waits for it.
				if historyUID != "" {
					sendStopNow()
				}
			}
		case s := <-stops:
			if s.err != nil && !abandoned {
				c.view.line("error: could not stop the reply: " + c.describe(s.err))
			}
		}
	}
}

// stored learns where the turn is stored: a new history's uid, and the
// character when the user named none.
func (c *chat) stored(m *protocol.ChatMessage) {
	if uid := m.AdditionalKwargs.HistoryUID; uid != "" {
		c.history = uid
	}
	if conf := m.AdditionalKwargs.ConfUID; conf != "" {
		c.conf = conf
	}
}

// failed shows why a turn failed. A stream that broke (koe stopped, a
// proxy cut it) is not sent again: koe may have stored the turn, cut; the
// user is told that the next message goes on in the same history.
func (c *chat) failed(err error) {
	if !errors.Is(err, client.ErrNoEnd) {
		c.view.line("error: " + c.describe(err))
		return
	}
	if c.history == "" {
		c.view.line(markReconnect + " the connection to koe broke before the reply began; the next message starts a new history")
		return
	}
	c.view.line(markReconnect + " the connection to koe broke; the next message goes on in history " + c.history)
}

// drainInterrupts drops a Ctrl-C that came as the turn ended: it was meant
// for the turn, not to quit at the prompt.
func (c *chat) drainInterrupts() {
	for {
		select {
		case <-c.term.Interrupts:
		default:
			return
		}
	}
}

// describe says what went wrong in the words a user can act on.
func (c *chat) describe(err error) string {
	var apiErr *client.APIError
	var urlErr *url.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode == 401:
		return fmt.Sprintf("%s (pass the token with -token or %s)", apiErr.Message, EnvToken)
	case errors.As(err, &apiErr):
		return apiErr.Message
	case errors.As(err, &urlErr):
		return fmt.Sprintf("cannot reach koe at %s (is it running? -url or %s sets the address): %v", c.url, EnvURL, urlErr.Err)
	}
	return err.Error()
}
