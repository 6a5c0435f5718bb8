package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of the coordination's metrics (coord.Observer), listed so
// that every series exists from the first scrape.
var (
	// LeaseWaitOutcomes are how a claim's wait for a held history ends.
	LeaseWaitOutcomes = []string{"released", "expired", "taken_over", "stopped"}
	// ReleaseRetryResults are how a release kept for Redis's return ends.
	ReleaseRetryResults = []string{"released", "gone", "expired", "dropped"}
)

// coordMetrics are the collectors of the turns' coordination through
// Redis (coord.backend: redis); with the memory backend they stay at 0.
type coordMetrics struct {
	leaseWait      *prometheus.HistogramVec
	redisRoundTrip prometheus.Histogram
	releaseRetries *prometheus.CounterVec
	takeovers      prometheus.Counter
}

// redisBuckets go from a round trip on loopback (50 µs) to a Redis that
// stalls (~3 s).
var redisBuckets = prometheus.ExponentialBuckets(0.00005, 3, 11)

// leaseWaitBuckets reach past coord.lease's default (10 s) and up to
// coord.wait's (30 s).
var leaseWaitBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30}

func newCoordMetrics(reg prometheus.Registerer) *coordMetrics {
	c := &coordMetrics{
		leaseWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "koe_coord_lease_wait_seconds", Help: "Time a turn's claim waited for its history while another turn held it (coord.backend: redis), by how the wait ended: released (the turn there ended when asked), expired (its lease expired unrenewed), taken_over (its instance's heartbeat had expired), stopped (the claim gave up: a newer turn, its client gone, or coord.wait).",
			Buckets: leaseWaitBuckets,
		}, []string{"outcome"}),
		redisRoundTrip: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "koe_coord_redis_round_trip_seconds", Help: "Time Redis took to answer each command of the turns' coordinator (claims, renewals, releases, stops, the live chat's election, the instance heartbeat every third of coord.heartbeat); commands that got no answer are not counted.",
			Buckets: redisBuckets,
		}),
		releaseRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "koe_coord_release_retries_total", Help: "Releases of ended turns' leases that failed while Redis was unreachable, by how they ended: released (done once Redis answered again), gone (the lease was no longer the turn's by then), expired (Redis answered only after the lease expired), dropped (not kept: coord.pending_releases were waiting).",
		}, []string{"result"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "koe_coord_dead_instance_takeovers_total", Help: "Leases taken over at once from instances whose heartbeat had expired (one per history), instead of waiting coord.lease.",
		}),
	}
	reg.MustRegister(c.leaseWait, c.redisRoundTrip, c.releaseRetries, c.takeovers)
	for _, o := range LeaseWaitOutcomes {
		c.leaseWait.WithLabelValues(o)
	}
	for _, r := range ReleaseRetryResults {
		c.releaseRetries.WithLabelValues(r)
	}
	return c
}

// LeaseWait records how long a claim waited for a held history, by how
// the wait ended (one of LeaseWaitOutcomes).
func (m *Metrics) LeaseWait(outcome string, d time.Duration) {
	m.coord.leaseWait.WithLabelValues(outcome).Observe(d.Seconds())
}

// RedisRoundTrip records one answered command of the coordinator's.
func (m *Metrics) RedisRoundTrip(d time.Duration) { m.coord.redisRoundTrip.Observe(d.Seconds()) }

// ReleaseRetried counts a release kept for Redis's return, by how it ended
// (one of ReleaseRetryResults).
func (m *Metrics) ReleaseRetried(result string) { m.coord.releaseRetries.WithLabelValues(result).Inc() }

// DeadInstanceTakeover counts a lease taken over from a dead instance.
func (m *Metrics) DeadInstanceTakeover() { m.coord.takeovers.Inc() }
