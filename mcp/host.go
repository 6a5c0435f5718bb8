//lint:file-ignore SA1019 MCP deprecates logging and sampling from protocol 2026-07-28, but servers still log this way (notifications/message), and koe's log is where their messages belong.

package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"koe/agent"
)

// hostState is what a server's requests and notices reach of koe: the
// calls under way (a progress report or a sampling request belongs to
// one), the sampling budget and the log's rate.
type hostState struct {
	cfg    ServerHost
	limits HostLimits

	mu    sync.Mutex
	next  int
	calls map[string]*liveCall // by progress token
	// latest is the token of the call begun last, whose character a
	// sampling request goes to.
	latest []string
	budget budget
	logs   logWindow
}

// liveCall is a call under way that came from a turn.
type liveCall struct {
	host *agent.ToolHost
	ctx  context.Context
	// shown is when its progress was last shown.
	shown time.Time
}

func newHostState(cfg ServerHost, lim HostLimits) *hostState {
	return &hostState{cfg: cfg, limits: lim, calls: map[string]*liveCall{}}
}

// hostOptions adds the handlers of what a server may send koe besides
// answers: progress, log messages, and (when allowed) sampling requests.
func (s *server) hostOptions(opts *sdk.ClientOptions) {
	opts.ProgressNotificationHandler = func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
		s.progress(req.Params)
	}
	opts.LoggingMessageHandler = func(_ context.Context, req *sdk.LoggingMessageRequest) {
		s.serverLog(req.Params)
	}
	if s.cfg.Sampling {
		opts.CreateMessageHandler = s.sample
	}
}

// begin registers a call from a turn, under the progress token it is
// sent with; end forgets it. Calls without a turn (host nil) get none.
func (h *hostState) begin(host *agent.ToolHost, ctx context.Context) (token string, end func()) {
	if host == nil {
		return "", func() {}
	}
	h.mu.Lock()
	h.next++
	token = "koe-" + strconv.Itoa(h.next)
	h.calls[token] = &liveCall{host: host, ctx: ctx}
	h.latest = append(h.latest, token)
	h.mu.Unlock()
	return token, func() {
		h.mu.Lock()
		delete(h.calls, token)
		for i, t := range h.latest {
			if t == token {
				h.latest = append(h.latest[:i], h.latest[i+1:]...)
				break
			}
		}
		h.mu.Unlock()
	}
}

// current is the call begun last that still runs (nil: none).
func (h *hostState) current() *liveCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.latest); n > 0 {
		return h.calls[h.latest[n-1]]
	}
	return nil
}

// progress shows a call's progress on its status entry, at most once per
// mcp_progress_interval: a server may report every millisecond.
func (s *server) progress(p *sdk.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token := fmt.Sprint(p.ProgressToken)
	now := time.Now()
	h := s.host
	h.mu.Lock()
	c := h.calls[token]
	due := c != nil && (c.shown.IsZero() || now.Sub(c.shown) >= h.limits.ProgressInterval)
	if due {
		c.shown = now
	}
	h.mu.Unlock()
	if !due {
		return
	}
	text := progressText(p)
	c.host.Progress(clip(text, 200))
}

func progressText(p *sdk.ProgressNotificationParams) string {
	amount := strconv.FormatFloat(p.Progress, 'f', -1, 64)
	if p.Total > 0 {
		amount += " of " + strconv.FormatFloat(p.Total, 'f', -1, 64)
	}
	if p.Message != "" {
		return p.Message + " (" + amount + ")"
	}
	return "progress " + amount
}

// logWindow counts a server's log messages in the current minute.
type logWindow struct {
	start   time.Time
	count   int
	dropped int
}

// serverLog puts a server's log message in koe's log at the level it
// maps to, within mcp_log_per_minute and mcp_max_log_chars.
func (s *server) serverLog(p *sdk.LoggingMessageParams) {
	if p == nil {
		return
	}
	now := time.Now()
	h := s.host
	h.mu.Lock()
	w := &h.logs
	dropped := 0
	if now.Sub(w.start) >= time.Minute {
		dropped = w.dropped
		*w = logWindow{start: now}
	}
	keep := w.count < h.limits.LogPerMinute
	if keep {
		w.count++
	} else {
		w.dropped++
	}
	first := w.dropped == 1 && !keep
	h.mu.Unlock()
	if first {
		s.log.Warn("MCP server's log messages are dropped for the rest of the minute: more than mcp_log_per_minute", "mcp_log_per_minute", h.limits.LogPerMinute)
	}
	if dropped > 0 {
		s.log.Warn("MCP server's log messages dropped: more than mcp_log_per_minute", "dropped", dropped, "mcp_log_per_minute", h.limits.LogPerMinute)
	}
	if !keep {
		return
	}
	data, ok := p.Data.(string)
	if !ok {
		b, err := json.Marshal(p.Data)
		if err != nil {
			data = fmt.Sprint(p.Data)
		} else {
			data = string(b)
		}
	}
	attrs := []any{"level", string(p.Level), "data", clip(data, h.limits.MaxLogChars)}
	if p.Logger != "" {
		attrs = append(attrs, "logger", clip(p.Logger, 100))
	}
	s.log.Log(context.Background(), logLevel(p.Level), "MCP server log", attrs...)
}

// logLevel maps MCP's syslog levels to slog's.
func logLevel(l sdk.LoggingLevel) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "info", "notice":
		return slog.LevelInfo
	case "warning":
		return slog.LevelWarn
	case "error", "critical", "alert", "emergency":
		return slog.LevelError
	}
	return slog.LevelInfo
}
