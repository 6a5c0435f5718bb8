package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Hostile HTTP: requests that try to make koe spend before it has checked
// who sends them.

// probeToken is server.auth_token in the scenarios that set one; the
// harness's own session carries it.
const probeToken = "hostile-probe-token-0123456789"

// declaredBody is the Content-Length the declared-body scenario sends
// without the token: a 10 MB upload and its multipart overhead, the
// largest body koe takes. declaredBodyToken is what declared-body-token
// sends with it: server.max_message_bytes's default, the largest chat
// request koe takes.
const (
	declaredBody      = 10551296
	declaredBodyToken = 8 << 20
)

const (
	declaredConns = 200
	// declaredWaves: the connections come in waves, each closed before the
	// next: memory koe took for one wave and freed is reused, zeroed and so
	// resident, for the next, as it would be in a koe that has run a while.
	declaredWaves = 3
	// declaredHold is how long the connections are held open before RSS
	// is read: koe answers a refused one at once, or waits for its body
	// up to server.read_timeout.
	declaredHold = 3 * time.Second
)

func declaredBodyScenario() scenario {
	return scenario{
		name: "declared-body",
		about: fmt.Sprintf("server.auth_token set; %d waves of %d connections each send the headers of a %d-byte chat request without the token, "+
			"and not a byte of the body: what koe holds for them, and whether /healthz still answers", declaredWaves, declaredConns, declaredBody),
		config: []setting{{"server.auth_token", probeToken}},
		token:  true,
		figure: "MiB RSS peak",
		run:    func(ctx context.Context, e *env) outcome { return runDeclared(ctx, e, false) },
	}
}

func declaredBodyTokenScenario() scenario {
	return scenario{
		name: "declared-body-token",
		about: fmt.Sprintf("as declared-body, but with the token: waves of %d accepted chat requests whose %d-byte bodies never come",
			declaredConns, declaredBodyToken),
		config: []setting{{"server.auth_token", probeToken}},
		token:  true,
		figure: "MiB RSS peak",
		run:    func(ctx context.Context, e *env) outcome { return runDeclared(ctx, e, true) },
	}
}

func runDeclared(ctx context.Context, e *env, withToken bool) outcome {
	statuses := map[string]int{}
	var health []string
	var heap int64
	for i := range declaredWaves {
		if i > 0 {
			churn(ctx, e)
		}
		h, inuse := declaredWave(ctx, e, withToken, statuses)
		health = append(health, h)
		heap = max(heap, inuse)
	}
	peak := e.peak()
	return outcome{
		value: float64(peak) / 1024,
		text: fmt.Sprintf("answers %s; RSS peak %s, Go heap in use with a wave open up to %s; /healthz with each wave open: %s",
			countText(statuses), mib(peak), mib(heap>>10), strings.Join(health, ", ")),
	}
}

// churn has koe read a few hundred megabytes of request bodies (a 1 MB
// reminder prompt saved over and over), as a koe in use reads, so that its
// collector runs and what it freed is handed out again.
func churn(ctx context.Context, e *env) {
	body := `{"text":"` + strings.Repeat("a", 1<<20) + `"}`
	for range 256 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+e.koe.Addr()+"/api/characters/koe_default/prompts/reminder", strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.token)
		if resp, err := e.http.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
}

// heapInUse reads go_memstats_heap_inuse_bytes off koe's /metrics.
func heapInUse(ctx context.Context, e *env) int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.koe.Addr()+"/metrics", nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := e.http.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			var f float64
			_, _ = fmt.Sscan(v, &f)
			return int64(f)
		}
	}
	return 0
}

// declaredWave opens declaredConns connections that declare a body and
// send none, reads koe's answers for declaredHold, asks /healthz and
// /metrics while they are open, closes them and says how /healthz
// answered and how much Go heap koe had in use.
func declaredWave(ctx context.Context, e *env, withToken bool, statuses map[string]int) (string, int64) {
	auth, size := "", declaredBody
	if withToken {
		auth, size = "Authorization: Bearer "+probeToken+"\r\n", declaredBodyToken
	}
	req := "POST /api/chat/stream HTTP/1.1\r\nHost: " + e.koe.Addr() + "\r\n" + auth +
		"Content-Type: application/json\r\nContent-Length: " + fmt.Sprint(size) + "\r\n\r\n"
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	sem := make(chan struct{}, dialParallel)
	for range declaredConns {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", e.koe.Addr())
			if err != nil {
				mu.Lock()
				statuses["dial failed"]++
				mu.Unlock()
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if _, err := io.WriteString(c, req); err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(declaredHold))
			status := "no answer"
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				status = resp.Status
				_ = resp.Body.Close()
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	start := time.Now()
	if _, err := e.healthz(ctx); err != nil {
		return "FAILED (" + clip(err.Error(), 40) + ")", heapInUse(ctx, e)
	}
	return "OK in " + time.Since(start).Round(time.Millisecond).String(), heapInUse(ctx, e)
}

// countText writes counts of outcomes, most frequent first.
func countText(n map[string]int) string {
	var parts []string
	for k, v := range n {
		parts = append(parts, fmt.Sprintf("%d× %s", v, k))
	}
	return strings.Join(parts, ", ")
}

// gzipBombBytes is what the gzip bomb inflates to.
const gzipBombBytes = 1 << 30

func gzipBombScenario() scenario {
	return scenario{
		name: "gzip-bomb",
		about: fmt.Sprintf("a chat request and a prompt PUT, each a body gzipped twice (Content-Encoding: gzip, gzip) "+
			"that inflates to %d MiB of JSON", gzipBombBytes>>20),
		figure: "MiB RSS peak",
		run:    runGzipBomb,
	}
}

func runGzipBomb(ctx context.Context, e *env) outcome {
	body, err := gzipBomb()
	if err != nil {
		return outcome{text: "building the bomb: " + err.Error(), value: nan()}
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	var answers []string
	start := time.Now()
	for _, target := range []string{"POST /api/chat/stream", "PUT /api/characters/koe_default/prompts/system"} {
		method, path, _ := strings.Cut(target, " ")
		req, err := http.NewRequestWithContext(ctx, method, "http://"+e.koe.Addr()+path, bytes.NewReader(body))
		if err != nil {
			return outcome{text: err.Error(), value: nan()}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip, gzip")
		resp, err := client.Do(req)
		if err != nil {
			answers = append(answers, method+": "+err.Error())
			continue
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		_ = resp.Body.Close()
		answers = append(answers, fmt.Sprintf("%s: %s %s", method, resp.Status, clip(strings.TrimSpace(string(msg)), 60)))
	}
	peak := e.peak()
	return outcome{
		value: float64(peak) / 1024,
		text:  fmt.Sprintf("%d-byte body; %s; RSS peak %s; %s", len(body), strings.Join(answers, "; "), mib(peak), time.Since(start).Round(time.Millisecond)),
	}
}

// gzipBomb is a JSON object padded with gzipBombBytes of spaces, gzipped
// twice.
func gzipBomb() ([]byte, error) {
	var inner bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&inner, gzip.BestCompression)
	if _, err := io.WriteString(zw, `{"text":"hi"`); err != nil {
		return nil, err
	}
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	for range gzipBombBytes >> 20 {
		if _, err := zw.Write(spaces); err != nil {
			return nil, err
		}
	}
	if _, err := io.WriteString(zw, "}"); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	var outer bytes.Buffer
	zw, _ = gzip.NewWriterLevel(&outer, gzip.BestCompression)
	if _, err := zw.Write(inner.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return outer.Bytes(), nil
}

const (
	fullConns  = 256
	fullProbes = 20
)

func healthFullScenario() scenario {
	return scenario{
		name: "health-full",
		about: fmt.Sprintf("server.max_connections %d, all taken by sockets that say nothing; then %d probes of /healthz, one after the other",
			fullConns, fullProbes),
		config: []setting{{"server.max_connections", fmt.Sprint(fullConns)}},
		figure: "probes answered 200",
		format: "%.0f",
		run:    runHealthFull,
	}
}

func runHealthFull(ctx context.Context, e *env) outcome {
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range fullConns {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", e.koe.Addr())
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	ok := 0
	statuses := map[string]int{}
	for range fullProbes {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.koe.Addr()+"/healthz", nil)
		resp, err := e.http.Do(req)
		if err != nil {
			statuses["error"]++
			continue
		}
		_ = resp.Body.Close()
		statuses[resp.Status]++
		if resp.StatusCode == http.StatusOK {
			ok++
		}
	}
	return outcome{value: float64(ok), text: fmt.Sprintf("%d idle sockets; probes: %s", len(conns), countText(statuses))}
}

func tokenLogScenario() scenario {
	return scenario{
		name:   "token-log",
		about:  "server.auth_token set; malformed requests carrying the token (Authorization, Cookie, ?token=): where the token shows up",
		config: []setting{{"server.auth_token", probeToken}},
		token:  true,
		figure: "token copies in answers and log",
		format: "%.0f",
		run:    runTokenLog,
	}
}

func runTokenLog(ctx context.Context, e *env) outcome {
	addr := e.koe.Addr()
	creds := "Authorization: Bearer " + probeToken + "\r\nCookie: koe_token=" + probeToken + "\r\n"
	reqs := []string{
		"GET /api/sessions?token=" + probeToken + " HTTP/1.1\r\nHost: " + addr + "\r\n" + creds + "No colon here\r\n\r\n",
		"GET /api/sessions?token=" + probeToken + " HTTP/1.1\r\nHost: " + addr + "\r\n" + creds + "X-A: a\x01b\r\n\r\n",
		"GET /api/sessions?token=" + probeToken + " HTTP/1.1\r\n" + creds + "Host: " + addr + "\r\nX-Long: " + strings.Repeat("a", 8<<10) + "\r\n\r\n",
		"GET\x00 /client-ws?token=" + probeToken + " HTTP/1.1\r\n" + creds + "Host: " + addr + "\r\n\r\n",
		"GET /api/sessions?token=" + probeToken + " HTTP/1.1\r\n" + creds + "Host: " + addr + "\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
	}
	inAnswers := 0
	for _, r := range reqs {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			continue
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, r)
		answer, _ := io.ReadAll(c)
		_ = c.Close()
		inAnswers += strings.Count(string(answer), probeToken)
	}
	// koe logs a refused request after answering it.
	time.Sleep(time.Second)
	log, _ := os.ReadFile(e.koe.LogPath)
	inLog := strings.Count(string(log), probeToken)
	return outcome{value: float64(inAnswers + inLog), text: fmt.Sprintf("%d malformed requests: the token %d times in the answers, %d times in koe's log", len(reqs), inAnswers, inLog)}
}
