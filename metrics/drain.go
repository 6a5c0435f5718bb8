package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Drain outcomes: how a turn running when koe began to drain ended.
const (
	DrainFinished = "finished" // it ended before server.drain_timeout
	DrainCut      = "cut"      // still running then: stopped and stored as heard
)

// drainMetrics show a drain before a restart: whether the instance drains,
// how its running turns ended, and how long it took. A drain happens once
// in a process's life, at its end: a scrape during it sees it.
type drainMetrics struct {
	draining prometheus.Gauge
	turns    *prometheus.CounterVec
	seconds  prometheus.Gauge
}

func newDrainMetrics(reg prometheus.Registerer) drainMetrics {
	d := drainMetrics{
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "koe_draining", Help: "1 from the first SIGTERM or SIGINT until koe exits: /readyz answers 503, new sessions and turns are sent elsewhere, running turns finish.",
		}),
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "koe_drain_turns_total", Help: "Turns running when koe began to drain, by how they ended: finished (before server.drain_timeout) or cut (stopped then, stored as heard).",
		}, []string{"outcome"}),
		seconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "koe_drain_seconds", Help: "How long the drain took, from the first signal until no turn ran or server.drain_timeout was over; 0 until it ends.",
		}),
	}
	reg.MustRegister(d.draining, d.turns, d.seconds)
	d.turns.WithLabelValues(DrainFinished)
	d.turns.WithLabelValues(DrainCut)
	return d
}

// Draining marks the instance draining; it stays so until it exits.
func (m *Metrics) Draining() { m.drain.draining.Set(1) }

// DrainTurnFinished counts a turn that ended while koe drained.
func (m *Metrics) DrainTurnFinished() { m.drain.turns.WithLabelValues(DrainFinished).Inc() }

// DrainEnded counts the turns the drain's end cuts and records how long it
// took.
func (m *Metrics) DrainEnded(cut int, took time.Duration) {
	m.drain.turns.WithLabelValues(DrainCut).Add(float64(cut))
	m.drain.seconds.Set(took.Seconds())
}
