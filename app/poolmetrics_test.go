package app_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/pgtest"
)

// With store: postgres, /metrics shows the store's connection pool as it
// is (the start's migrations and /readyz's ping took connections from
// it), under the configured instance name like every other metric; with
// bbolt, no pool is shown.
func TestPoolMetricsOfPostgresStore(t *testing.T) {
	dsn := pgtest.Schema(t)
	llm := koetest.StartLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Hi.")} })
	cfg := koetest.Config(t, t.TempDir(), llm.URL())
	cfg.Store, cfg.StoreDSN = config.StorePostgres, dsn+"&pool_max_conns=7"
	cfg.Instance = "koe-pool-a"
	m := koetest.StartKoe(t, cfg)

	if status, _ := getPlain(t, "http://"+m.Addr()+"/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz: %d", status)
	}
	_, page := getPlain(t, "http://"+m.Addr()+"/metrics")
	series := func(name, labels string) float64 {
		t.Helper()
		re := regexp.MustCompile("(?m)^" + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`)
		match := re.FindStringSubmatch(page)
		if match == nil {
			t.Fatalf("/metrics has no %s{%s}:\n%s", name, labels, grepLines(page, "koe_postgres_pool"))
		}
		v, err := strconv.ParseFloat(match[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const store = `koe_instance="koe-pool-a",pool="store"`
	if v := series("koe_postgres_pool_max_connections", store); v != 7 {
		t.Errorf("max connections %v, want the DSN's pool_max_conns 7", v)
	}
	if v := series("koe_postgres_pool_acquires_total", store); v < 1 {
		t.Errorf("acquires %v after the migrations and a ping, want some", v)
	}
	idle := series("koe_postgres_pool_connections", `koe_instance="koe-pool-a",pool="store",state="idle"`)
	acquired := series("koe_postgres_pool_connections", `koe_instance="koe-pool-a",pool="store",state="acquired"`)
	if idle+acquired < 1 || idle+acquired > 7 {
		t.Errorf("idle %v + acquired %v connections, want 1 to 7", idle, acquired)
	}
	series("koe_postgres_pool_acquire_seconds_total", store)
	series("koe_postgres_pool_empty_acquires_total", store)
	series("koe_postgres_pool_canceled_acquires_total", store)

	bolt := koetest.StartKoe(t, koetest.Config(t, t.TempDir(), llm.URL()))
	if _, page := getPlain(t, "http://"+bolt.Addr()+"/metrics"); strings.Contains(page, "koe_postgres_pool") {
		t.Errorf("a bbolt koe shows pool metrics:\n%s", grepLines(page, "koe_postgres_pool"))
	}
}

// getPlain GETs url and returns its status and body.
func getPlain(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: time.Minute} // a hang guard only
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// grepLines is the lines of text that hold s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
