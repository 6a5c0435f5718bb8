package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolStat is a database connection pool's state at one moment, as
// pgxpool's Stat reports it (postgres stays the only package that knows
// pgx; app hands its Stat over as this).
type PoolStat interface {
	AcquiredConns() int32
	IdleConns() int32
	ConstructingConns() int32
	MaxConns() int32
	AcquireCount() int64
	AcquireDuration() time.Duration
	EmptyAcquireCount() int64
	CanceledAcquireCount() int64
}

// WatchPool exports the PostgreSQL connection pool named pool (store, for
// the history store; knowledge, for knowledge.store: postgres) as the
// koe_postgres_pool_* metrics, read from stat at each scrape: nothing is
// counted on the queries' path.
func (m *Metrics) WatchPool(pool string, stat func() PoolStat) {
	m.reg.MustRegister(newPoolCollector(pool, stat))
}

// poolCollector reads one pool's state at each scrape. Acquire counts and
// times are pgxpool's own running totals, so they are counters;
// connections by state are gauges, and their sum is the pool's size.
type poolCollector struct {
	stat                                         func() PoolStat
	conns, max, acquires, seconds, empty, cancel *prometheus.Desc
}

func newPoolCollector(pool string, stat func() PoolStat) *poolCollector {
	l := prometheus.Labels{"pool": pool}
	return &poolCollector{
		stat: stat,
		conns: prometheus.NewDesc("koe_postgres_pool_connections",
			"Connections of a PostgreSQL pool by state: acquired (running a query or a transaction), idle, constructing; their sum is the pool's size.", []string{"state"}, l),
		max: prometheus.NewDesc("koe_postgres_pool_max_connections",
			"The most connections a PostgreSQL pool opens (pool_max_conns in the connection string).", nil, l),
		acquires: prometheus.NewDesc("koe_postgres_pool_acquires_total",
			"Connections taken from a PostgreSQL pool.", nil, l),
		seconds: prometheus.NewDesc("koe_postgres_pool_acquire_seconds_total",
			"Time spent taking connections from a PostgreSQL pool, waits for a free one included.", nil, l),
		empty: prometheus.NewDesc("koe_postgres_pool_empty_acquires_total",
			"Acquires that found no idle connection and waited for one to be opened or freed; growing with the acquires, the pool is too small for the load.", nil, l),
		cancel: prometheus.NewDesc("koe_postgres_pool_canceled_acquires_total",
			"Acquires given up because the caller's context ended (store_timeout, a client gone) before a connection was free.", nil, l),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.conns, c.max, c.acquires, c.seconds, c.empty, c.cancel} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.seconds, prometheus.CounterValue, s.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(c.empty, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.cancel, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
}
