package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Profiles show koe's internals: -pprof on anything but a loopback address
// stops koe before it serves anything, with an error that says why.
func TestPprofRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{
		"0.0.0.0:6060", ":6060", "[::]:6060", "192.168.1.2:6060", "example.org:6060",
		"localhost.example.org:6060", "127.0.0.1",
	} {
		t.Run(addr, func(t *testing.T) {
			keepDefaultLogger(t)
			port := freePort(t)
			path := writeConf(t, "data_dir: "+filepath.ToSlash(t.TempDir())+"\n")
			var stderr syncBuffer
			// Hang guard: a koe that accepted the address serves until then.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, []string{"-config", path, "-port", port, "-pprof", addr}, &stderr, noEnv)
			if err == nil || !strings.Contains(err.Error(), "-pprof") {
				t.Fatalf("-pprof %q: error %v, want one naming -pprof", addr, err)
			}
			if !strings.Contains(err.Error(), "loopback") {
				t.Errorf("-pprof %q: error %q does not say loopback", addr, err)
			}
			if strings.Contains(stderr.String(), "koe is listening") {
				t.Errorf("koe served despite the refusal; log:\n%s", stderr.String())
			}
		})
	}
}

// runWithPprof runs koe with -pprof and conf added to a configuration of
// its own until stop, which fails the test if run did.
func runWithPprof(t *testing.T, conf string) (port, pprofPort string, stop func()) {
	t.Helper()
	keepDefaultLogger(t)
	port, pprofPort = freePort(t), freePort(t)
	path := writeConf(t, "data_dir: "+filepath.ToSlash(t.TempDir())+
		"\nasr:\n  engine: none\ncharacter:\n  tts:\n    engine: none\n"+conf)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-config", path, "-port", port, "-pprof", "127.0.0.1:" + pprofPort}, &stderr, noEnv)
	}()
	waitHealthy(t, "http://127.0.0.1:"+port+"/healthz", done)
	return port, pprofPort, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}
	}
}

func TestPprofServesOnLoopback(t *testing.T) {
	port, pprofPort, stop := runWithPprof(t, "")

	resp, err := http.Get("http://127.0.0.1:" + pprofPort + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// run's own goroutine is in the dump: the profiles are this process's.
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "koe.TestPprofServesOnLoopback") {
		t.Errorf("goroutine profile: %d %.300q", resp.StatusCode, body)
	}
	// koe's own port does not serve the profiles.
	resp, err = http.Get("http://127.0.0.1:" + port + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("koe's port serves the profiles")
	}

	stop()
	if c, err := net.Dial("tcp", "127.0.0.1:"+pprofPort); err == nil {
		c.Close()
		t.Error("the pprof port is still open after shutdown")
	}
}

// The profile port makes the checks koe's own port makes: a page on a
// rebound domain name cannot read the profiles from the user's browser,
// and with server.auth_token set they need the token.
func TestPprofChecksHostAndToken(t *testing.T) {
	const token = "pprof-token-0123456789abcdef"
	_, pprofPort, stop := runWithPprof(t, "server:\n  auth_token: "+token+"\n")

	base := "http://127.0.0.1:" + pprofPort + "/debug/pprof/goroutine?debug=1"
	get := func(url, host string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if host != "" {
			req.Host = host
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name   string
		url    string
		host   string
		header []string
		want   int
	}{
		{"no token", base, "", nil, http.StatusUnauthorized},
		{"a wrong token", base, "", []string{"Authorization", "Bearer wrong-token-0123456789abcdef"}, http.StatusUnauthorized},
		{"the token", base, "", []string{"Authorization", "Bearer " + token}, http.StatusOK},
		{"the token in the query", base + "&token=" + token, "", nil, http.StatusOK},
		{"a rebound host name", base, "attacker.example:" + pprofPort, []string{"Authorization", "Bearer " + token}, http.StatusForbidden},
		{"localhost", base, "localhost:" + pprofPort, []string{"Authorization", "Bearer " + token}, http.StatusOK},
	} {
		if got := get(tc.url, tc.host, tc.header...); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	stop()
}
