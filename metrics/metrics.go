// Package metrics is koe's Prometheus instrumentation: one registry of
// koe's own (the process's default registry stays untouched), the Go and
// process collectors, and the counters and histograms that conversation,
// server and the store timing (store.go) feed through small interfaces.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"koe/agent"
	"koe/asr"
	"koe/tts"
)

// Label values koe uses; listed so that every series exists (at 0) from
// the first scrape, which rate() and alerts need.
var (
	// SessionKinds are the kinds of open session koe counts.
	SessionKinds = []string{"websocket", "watcher", "sse", "live", "realtime"}
	// Outcomes are how a turn ends.
	Outcomes = []string{OutcomeCompleted, OutcomeUnsaved, OutcomeInterrupted, OutcomeStopped, OutcomeFailed}
	// Queues are where frames are dropped.
	Queues = []string{"websocket", "watcher"}
)

// Turn outcomes.
const (
	OutcomeCompleted   = "completed"   // the reply was sent (and played) whole
	OutcomeUnsaved     = "unsaved"     // sent whole, but a record of the turn could not be stored
	OutcomeInterrupted = "interrupted" // its own client interrupted it or sent something new
	OutcomeStopped     = "stopped"     // stopped from outside: a stop request, another turn in the history, a switch, a disconnect, shutdown
	OutcomeFailed      = "failed"      // the LLM, speech input or koe failed; the client got an error
)

// Metrics holds koe's collectors. Its methods are safe for concurrent use
// and cheap (an atomic add or a histogram observation): they run on turns'
// paths.
type Metrics struct {
	// reg registers on registry with the instance's label added (see
	// NewInstance): register every collector through it.
	reg      prometheus.Registerer
	registry *prometheus.Registry

	sessions     *prometheus.GaugeVec
	turnsStarted prometheus.Counter
	turnsEnded   *prometheus.CounterVec
	firstToken   prometheus.Histogram
	firstAudio   prometheus.Histogram
	depErrors    *prometheus.CounterVec
	drops        *prometheus.CounterVec
	storeSeconds *prometheus.HistogramVec
	storeErrors  *prometheus.CounterVec
	liveLeader   prometheus.Gauge
	drain        drainMetrics  // drain.go
	coord        *coordMetrics // coord.go
}

// latencyBuckets cover what a user notices, from instant to given up.
var latencyBuckets = []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20}

// storeBuckets go from a cached read (100 µs) to a stalled disk (~10 s).
var storeBuckets = prometheus.ExponentialBuckets(0.0001, 3, 12)

// InstanceLabel is the label that names the instance on every metric.
// Not "instance": Prometheus sets that one to the scraped address, and a
// scraped "instance" would be renamed exported_instance.
const InstanceLabel = "koe_instance"

// New builds the collectors on a registry of their own, without an
// instance label.
func New() *Metrics { return NewInstance("") }

// NewInstance builds the collectors on a registry of their own; every
// metric registered on it, the Go and process collectors' too, carries
// koe_instance="instance" unless instance is "". Several instances behind
// one proxy then stay apart in one Prometheus, even where their scraped
// addresses do not tell them apart (a proxy, a container's address that
// changes at each restart).
func NewInstance(instance string) *Metrics {
	registry := prometheus.NewRegistry()
	m := &Metrics{reg: registry, registry: registry}
	if instance != "" {
		m.reg = prometheus.WrapRegistererWith(prometheus.Labels{InstanceLabel: instance}, registry)
	}
	m.sessions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "koe_sessions_open", Help: "Open sessions by kind: websocket (a client), watcher (an overlay or second screen), sse (a chat API stream), live (a live chat's character).",
	}, []string{"kind"})
	m.turnsStarted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "koe_turns_started_total", Help: "Turns started (a text, a recording, a proactive line, a chat API request, a live chat message).",
	})
	m.turnsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "koe_turns_ended_total", Help: "Turns ended, by outcome: completed, unsaved, interrupted, stopped, failed.",
	}, []string{"outcome"})
	m.firstToken = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "koe_first_token_seconds", Help: "From a turn's input reaching koe (a recording's transcription included) to the LLM's first token.", Buckets: latencyBuckets,
	})
	m.firstAudio = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "koe_first_audio_seconds", Help: "From a turn's input reaching koe (a recording's transcription included) to its first audio frame being queued for the client; turns without speech are not counted.", Buckets: latencyBuckets,
	})
	m.depErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "koe_dependency_errors_total", Help: "Failures of the services koe calls, by service (llm, tts, asr) and kind.",
	}, []string{"service", "kind"})
	m.drops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "koe_queue_drops_total", Help: "Drops for a full queue: websocket (a client that stopped reading, disconnected), watcher (a watcher that fell behind, disconnected), watch_relay (a frame for other instances' watchers, not relayed).",
	}, []string{"queue"})
	m.storeSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "koe_store_operation_seconds", Help: "Time of the history store's operations that conversations call, by operation.", Buckets: storeBuckets,
	}, []string{"op"})
	m.storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "koe_store_errors_total", Help: "History store operations that failed (not found excluded), by operation.",
	}, []string{"op"})
	m.liveLeader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "koe_live_chat_leader", Help: "1 while this instance runs the live chat, else 0. With coord: redis only the elected instance runs it: the sum over the instances is 1, or 0 during an election.",
	})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.sessions, m.turnsStarted, m.turnsEnded, m.firstToken, m.firstAudio,
		m.depErrors, m.drops, m.storeSeconds, m.storeErrors, m.liveLeader,
	)
	m.drain = newDrainMetrics(m.reg)
	m.coord = newCoordMetrics(m.reg)
	for _, k := range SessionKinds {
		m.sessions.WithLabelValues(k)
	}
	for _, o := range Outcomes {
		m.turnsEnded.WithLabelValues(o)
	}
	for _, q := range Queues {
		m.drops.WithLabelValues(q)
	}
	return m
}

// Registry is koe's registry, for tests to gather from. Collectors are
// registered through m.reg, which adds the instance's label.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics, if the scraper asks for it). A collector that fails is
// reported in the response, the rest is still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// SessionOpened counts a session of kind as open until the returned
// function is called (once).
func (m *Metrics) SessionOpened(kind string) (closed func()) {
	g := m.sessions.WithLabelValues(kind)
	g.Inc()
	return g.Dec
}

// TurnStarted counts a turn.
func (m *Metrics) TurnStarted() { m.turnsStarted.Inc() }

// TurnEnded counts a turn's end by outcome.
func (m *Metrics) TurnEnded(outcome string) { m.turnsEnded.WithLabelValues(outcome).Inc() }

// FirstToken records how long a turn waited for the LLM's first token.
func (m *Metrics) FirstToken(d time.Duration) { m.firstToken.Observe(d.Seconds()) }

// FirstAudio records how long a turn waited for its first audio.
func (m *Metrics) FirstAudio(d time.Duration) { m.firstAudio.Observe(d.Seconds()) }

// LiveChatLeader records whether this instance runs the live chat.
func (m *Metrics) LiveChatLeader(running bool) {
	v := 0.0
	if running {
		v = 1
	}
	m.liveLeader.Set(v)
}

// Services whose failures are counted.
const (
	ServiceLLM = "llm"
	ServiceTTS = "tts"
	ServiceASR = "asr"
)

// DependencyFailed counts a failure of service (llm, tts, asr), labelled
// with its kind (see ErrorKind).
func (m *Metrics) DependencyFailed(service string, err error) {
	m.depErrors.WithLabelValues(service, ErrorKind(err)).Inc()
}

// QueueDropped counts a connection dropped because its queue was full.
func (m *Metrics) QueueDropped(queue string) { m.drops.WithLabelValues(queue).Inc() }

// StoreOp records one store operation's time, and counts it as failed if
// failed.
func (m *Metrics) StoreOp(op string, d time.Duration, failed bool) {
	m.storeSeconds.WithLabelValues(op).Observe(d.Seconds())
	if failed {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// ErrorKind names the kind of a dependency's failure for the kind label:
// an LLM error's kind by name (unreachable, unauthorized, rate_limited,
// server, timeout, ...), context_too_large, timeout, unreachable,
// bad_audio (a recording koe could not read), bad_output (an engine's
// answer that is not audio), or other.
func ErrorKind(err error) string {
	var le *agent.LLMError
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.As(err, &le):
		if name, ok := llmKinds[le.Kind]; ok {
			return name
		}
		return "other"
	case errors.Is(err, agent.ErrContextTooLarge):
		return "context_too_large"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, &op) && op.Op == "dial":
		return "unreachable"
	case errors.Is(err, asr.ErrBadAudio), errors.Is(err, asr.ErrNotWAV), errors.Is(err, asr.ErrNoAudio):
		return "bad_audio"
	case errors.Is(err, tts.ErrNotWAV):
		return "bad_output"
	}
	return "other"
}

var llmKinds = map[agent.ErrorKind]string{
	agent.KindUnreachable:      "unreachable",
	agent.KindUnauthorized:     "unauthorized",
	agent.KindNotFound:         "not_found",
	agent.KindRateLimited:      "rate_limited",
	agent.KindServer:           "server",
	agent.KindBadRequest:       "bad_request",
	agent.KindBrokenStream:     "broken_stream",
	agent.KindTimeout:          "timeout",
	agent.KindReplyTooLong:     "reply_too_long",
	agent.KindEmptyReply:       "empty_reply",
	agent.KindToolsUnsupported: "tools_unsupported",
	agent.KindTooManyCycles:    "too_many_cycles",
	agent.KindUnofferedTools:   "unoffered_tools",
	agent.KindTooLarge:         "too_large",
}
