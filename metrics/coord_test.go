package metrics_test

import (
	"slices"
	"testing"
	"time"

	"koe/coord"
	"koe/metrics"
)

var _ coord.Observer = (*metrics.Metrics)(nil)

// The label values listed at start are the ones coord reports.
func TestCoordLabelsMatchCoord(t *testing.T) {
	if want := []string{coord.WaitReleased, coord.WaitExpired, coord.WaitTakenOver, coord.WaitStopped}; !slices.Equal(metrics.LeaseWaitOutcomes, want) {
		t.Fatalf("metrics.LeaseWaitOutcomes = %v, coord reports %v", metrics.LeaseWaitOutcomes, want)
	}
	if want := []string{coord.RetryReleased, coord.RetryGone, coord.RetryExpired, coord.RetryDropped}; !slices.Equal(metrics.ReleaseRetryResults, want) {
		t.Fatalf("metrics.ReleaseRetryResults = %v, coord reports %v", metrics.ReleaseRetryResults, want)
	}
}

// What coord reports is what the registry exposes.
func TestCoordCounts(t *testing.T) {
	m := metrics.New()
	if got := gathered(t, m, "koe_coord_release_retries_total", "dropped"); got != 0 {
		t.Fatalf("koe_coord_release_retries_total{dropped} before any = %v, want 0", got)
	}
	m.ReleaseRetried(coord.RetryReleased)
	m.ReleaseRetried(coord.RetryReleased)
	m.DeadInstanceTakeover()
	m.LeaseWait(coord.WaitTakenOver, 2*time.Second)
	m.RedisRoundTrip(200 * time.Microsecond)
	if got := gathered(t, m, "koe_coord_release_retries_total", "released"); got != 2 {
		t.Errorf("koe_coord_release_retries_total{released} = %v, want 2", got)
	}
	if got := gathered(t, m, "koe_coord_dead_instance_takeovers_total", ""); got != 1 {
		t.Errorf("koe_coord_dead_instance_takeovers_total = %v, want 1", got)
	}
	if got := gathered(t, m, "koe_coord_lease_wait_seconds", "taken_over"); got != 1 {
		t.Errorf("koe_coord_lease_wait_seconds{taken_over} count = %v, want 1", got)
	}
	if got := gathered(t, m, "koe_coord_redis_round_trip_seconds", ""); got != 1 {
		t.Errorf("koe_coord_redis_round_trip_seconds count = %v, want 1", got)
	}
}
