package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"koe/metrics"
)

// Every series a named instance exposes carries koe_instance, the Go and
// process collectors' and a pool's included, so that instances behind one
// proxy stay apart; without a name, none does.
func TestInstanceLabelOnEverySeries(t *testing.T) {
	m := metrics.NewInstance("koe-2")
	m.WatchPool("store", func() metrics.PoolStat { return fakePool{} })
	m.TurnStarted()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var seen, goSeen int
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			seen++
			if strings.HasPrefix(f.GetName(), "go_") {
				goSeen++
			}
			if v := labelValue(s.GetLabel(), metrics.InstanceLabel); v != "koe-2" {
				t.Errorf("%s{%v}: koe_instance %q, want koe-2", f.GetName(), s.GetLabel(), v)
			}
		}
	}
	if seen == 0 || goSeen == 0 {
		t.Fatalf("gathered %d series, %d of Go's", seen, goSeen)
	}
	// What Prometheus scrapes says it too.
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), `koe_turns_started_total{koe_instance="koe-2"} 1`) {
		t.Errorf("/metrics lacks the labelled counter:\n%.2000s", body)
	}

	unnamed := metrics.New()
	fams, err = unnamed.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			if v := labelValue(s.GetLabel(), metrics.InstanceLabel); v != "" {
				t.Errorf("unnamed: %s has koe_instance %q", f.GetName(), v)
			}
		}
	}
}

// A pool's state is read at each scrape: its connections by state, its
// size limit and its acquire totals.
func TestPoolMetrics(t *testing.T) {
	m := metrics.New()
	p := &fakePool{acquired: 3, idle: 2, max: 8, acquires: 41, waited: 1500 * time.Millisecond, empty: 7, canceled: 1}
	m.WatchPool("store", func() metrics.PoolStat { return *p })
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"koe_postgres_pool_connections", "store/acquired", 3},
		{"koe_postgres_pool_connections", "store/idle", 2},
		{"koe_postgres_pool_connections", "store/constructing", 0},
		{"koe_postgres_pool_max_connections", "store", 8},
		{"koe_postgres_pool_acquires_total", "store", 41},
		{"koe_postgres_pool_acquire_seconds_total", "store", 1.5},
		{"koe_postgres_pool_empty_acquires_total", "store", 7},
		{"koe_postgres_pool_canceled_acquires_total", "store", 1},
	} {
		if got := gathered(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	p.acquired, p.acquires = 0, 42
	if got := gathered(t, m, "koe_postgres_pool_connections", "store/acquired"); got != 0 {
		t.Errorf("acquired after release = %v, want 0 (read at each scrape)", got)
	}
	if got := gathered(t, m, "koe_postgres_pool_acquires_total", "store"); got != 42 {
		t.Errorf("acquires = %v, want 42", got)
	}
	if problems, err := testutil.GatherAndLint(m.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("the pool's metrics do not follow Prometheus conventions: %v %v", problems, err)
	}
}

type fakePool struct {
	acquired, idle, constructing, max int32
	acquires, empty, canceled         int64
	waited                            time.Duration
}

func (p fakePool) AcquiredConns() int32           { return p.acquired }
func (p fakePool) IdleConns() int32               { return p.idle }
func (p fakePool) ConstructingConns() int32       { return p.constructing }
func (p fakePool) MaxConns() int32                { return p.max }
func (p fakePool) AcquireCount() int64            { return p.acquires }
func (p fakePool) AcquireDuration() time.Duration { return p.waited }
func (p fakePool) EmptyAcquireCount() int64       { return p.empty }
func (p fakePool) CanceledAcquireCount() int64    { return p.canceled }

func labelValue(pairs []*dto.LabelPair, name string) string {
	for _, l := range pairs {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
