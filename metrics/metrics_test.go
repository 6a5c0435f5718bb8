package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"koe/agent"
	"koe/asr"
	"koe/conversation"
	"koe/metrics"
	"koe/server"
	"koe/tts"
)

// The interfaces the metrics fill, checked where they are declared.
var (
	_ conversation.Observer = (*metrics.Metrics)(nil)
	_ server.Metrics        = (*metrics.Metrics)(nil)
)

// TestOutcomesMatchConversation: the outcomes listed at start (so that
// their series exist at 0) are the ones conversation reports.
func TestOutcomesMatchConversation(t *testing.T) {
	want := []string{conversation.TurnCompleted, conversation.TurnUnsaved, conversation.TurnInterrupted, conversation.TurnStopped, conversation.TurnFailed}
	if !slices.Equal(metrics.Outcomes, want) {
		t.Fatalf("metrics.Outcomes = %v, conversation reports %v", metrics.Outcomes, want)
	}
	services := []string{conversation.ServiceLLM, conversation.ServiceTTS, conversation.ServiceASR}
	if !slices.Equal(services, []string{metrics.ServiceLLM, metrics.ServiceTTS, metrics.ServiceASR}) {
		t.Fatalf("service names differ: %v", services)
	}
}

func TestErrorKind(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, c := range []struct {
		err  error
		want string
	}{
		{&agent.LLMError{Kind: agent.KindRateLimited}, "rate_limited"},
		{fmt.Errorf("turn: %w", &agent.LLMError{Kind: agent.KindTimeout}), "timeout"},
		{&agent.LLMError{Kind: agent.ErrorKind(999)}, "other"},
		{fmt.Errorf("prompt: %w", agent.ErrContextTooLarge), "context_too_large"},
		{fmt.Errorf("synthesize: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("post: %w", dial), "unreachable"},
		{fmt.Errorf("decode: %w", asr.ErrBadAudio), "bad_audio"},
		{fmt.Errorf("engine: %w", tts.ErrNotWAV), "bad_output"},
		{errors.New("something else"), "other"},
	} {
		if got := metrics.ErrorKind(c.err); got != c.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestCounts: what the methods are told is what the registry exposes.
func TestCounts(t *testing.T) {
	m := metrics.New()
	closed := m.SessionOpened("watcher")
	m.TurnStarted()
	m.TurnStarted()
	m.TurnEnded(metrics.OutcomeCompleted)
	m.FirstAudio(300 * time.Millisecond)
	m.DependencyFailed(metrics.ServiceTTS, context.DeadlineExceeded)
	m.QueueDropped("websocket")
	m.StoreOp("append", time.Millisecond, true)
	if got := gathered(t, m, "koe_live_chat_leader", ""); got != 0 {
		t.Errorf("koe_live_chat_leader before any live chat = %v, want 0", got)
	}
	m.LiveChatLeader(true)
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"koe_turns_started_total", "", 2},
		{"koe_turns_ended_total", "completed", 1},
		{"koe_turns_ended_total", "stopped", 0},
		{"koe_sessions_open", "watcher", 1},
		{"koe_queue_drops_total", "websocket", 1},
		{"koe_dependency_errors_total", "timeout/tts", 1},
		{"koe_store_errors_total", "append", 1},
		{"koe_live_chat_leader", "", 1},
	} {
		if got := gathered(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	m.LiveChatLeader(false)
	if got := gathered(t, m, "koe_live_chat_leader", ""); got != 0 {
		t.Errorf("koe_live_chat_leader after the live chat stopped here = %v, want 0", got)
	}
	closed()
	if got := gathered(t, m, "koe_sessions_open", "watcher"); got != 0 {
		t.Errorf("watcher sessions after close: %v", got)
	}
	if n := testutil.CollectAndCount(m.Registry(), "koe_first_audio_seconds"); n != 1 {
		t.Errorf("first audio histograms: %d", n)
	}
	if problems, err := testutil.GatherAndLint(m.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("metric names and help do not follow Prometheus conventions: %v %v", problems, err)
	}
}

// gathered is the value of the series of name whose label values, joined
// by "/", are labels (of a histogram, its count of observations).
func gathered(t *testing.T, m *metrics.Metrics, name, labels string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			var vals []string
			for _, l := range s.GetLabel() {
				vals = append(vals, l.GetValue())
			}
			if fmt.Sprint(joined(vals)) != labels {
				continue
			}
			switch {
			case s.Counter != nil:
				return s.Counter.GetValue()
			case s.Gauge != nil:
				return s.Gauge.GetValue()
			case s.Histogram != nil:
				return float64(s.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func joined(vals []string) string {
	out := ""
	for i, v := range vals {
		if i > 0 {
			out += "/"
		}
		out += v
	}
	return out
}

// BenchmarkTurn is what one spoken turn costs the instrumentation: the
// turn's start and end, its first token and audio, and the store's calls
// of a turn (an append of the user's message and of the reply, a read of
// the newest record).
func BenchmarkTurn(b *testing.B) {
	m := metrics.New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.TurnStarted()
			m.FirstToken(180 * time.Millisecond)
			m.FirstAudio(420 * time.Millisecond)
			m.StoreOp("append", 200*time.Microsecond, false)
			m.StoreOp("append", 200*time.Microsecond, false)
			m.StoreOp("last_seq", 20*time.Microsecond, false)
			m.TurnEnded(metrics.OutcomeCompleted)
		}
	})
}
