package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gorilla/websocket"

	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/tlstest"
)

// nginx in the tests serves deploy/nginx.conf's TLS with one certificate,
// made when the test binary starts; the test process's default HTTP
// transport and WebSocket dialer trust it (and the system's roots no
// longer: the tests speak to loopback only). nginxTLS holds the addresses
// where nginx serves TLS, so that httpURL and wsURL pick the scheme.
var (
	nginxCert *tlstest.Cert
	nginxTLS  sync.Map // address → true
)

func init() {
	if os.Getenv(childEnv) == "1" {
		return // koe itself, run by a test
	}
	c, err := tlstest.Make(4242, tlstest.ECDSAP256)
	if err != nil {
		panic(err)
	}
	nginxCert = c
	trust := tlstest.ClientConfig(c)
	http.DefaultTransport.(*http.Transport).TLSClientConfig = trust
	websocket.DefaultDialer.TLSClientConfig = trust
}

// writeNginxCert writes the tests' nginx certificate into dir.
func writeNginxCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, err := nginxCert.Write(dir, "koe")
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// httpURL is the base URL of koe or nginx at addr.
func httpURL(addr string) string {
	if _, ok := nginxTLS.Load(addr); ok {
		return "https://" + addr
	}
	return "http://" + addr
}

// wsURL is the WebSocket base URL of koe or nginx at addr.
func wsURL(addr string) string {
	if _, ok := nginxTLS.Load(addr); ok {
		return "wss://" + addr
	}
	return "ws://" + addr
}

// SIGHUP to a real koe process swaps its certificate for the files' new
// one, and a bad pair is logged and the old certificate kept; koe keeps
// running through both (SIGHUP's default action would end it).
func TestSIGHUPReloadsCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts koe in a child process")
	}
	llm, err := fakellm.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	certs := make([]*tlstest.Cert, 3)
	for i := range certs {
		if certs[i], err = tlstest.Make(int64(i+1), tlstest.ECDSAP256); err != nil {
			t.Fatal(err)
		}
	}
	trust := tlstest.ClientConfig(certs...)
	dir := t.TempDir()
	certFile, keyFile, err := certs[0].Write(dir, "koe")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "conf.yaml")
	yaml := fmt.Sprintf("data_dir: %s\ncharacters_dir: %s\nserver:\n  tls_cert: %s\n  tls_key: %s\n  backgrounds_dir: %s\ncharacter:\n  llm:\n    base_url: %s\n    model: %s\n  tts:\n    engine: none\n",
		filepath.Join(dir, "data"), filepath.Join(dir, "characters"), certFile, keyFile, filepath.Join(dir, "bg"), llm.URL(), fakellm.ModelID)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	koe := startKoeProcess(t, conf)
	if got := tlstest.Serial(t, koe.addr, trust); got != 1 {
		t.Fatalf("koe serves serial %d at start, want 1", got)
	}
	hup := func(logLine string, n int) {
		t.Helper()
		if err := koe.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, fmt.Sprintf("koe logs %q %d times", logLine, n), func() bool {
			select {
			case <-koe.exited:
				t.Fatalf("koe exited on SIGHUP: %v\n%s", koe.err, koe.log.String())
			default:
			}
			return strings.Count(koe.log.String(), logLine) >= n
		})
	}

	if _, _, err := certs[1].Write(dir, "koe"); err != nil {
		t.Fatal(err)
	}
	hup(`msg="TLS certificate reloaded`, 1)
	if got := tlstest.Serial(t, koe.addr, trust); got != 2 {
		t.Fatalf("after SIGHUP koe serves serial %d, want 2", got)
	}

	// The third certificate with the second's key: refused, the second
	// kept.
	if err := os.WriteFile(certFile, certs[2].CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	hup(`msg="TLS certificate reload failed; koe keeps serving the certificate it had"`, 1)
	if got := tlstest.Serial(t, koe.addr, trust); got != 2 {
		t.Fatalf("after a SIGHUP with a bad pair koe serves serial %d, want 2 (the one it had)", got)
	}
	if !strings.Contains(koe.log.String(), "server.tls_cert "+certFile) {
		t.Errorf("the failed reload's log line does not name the file:\n%s", koe.log.String())
	}
}

// upstreamStub is an upstream for nginx that answers every request with
// status and counts them.
type upstreamStub struct {
	addr string
	hits atomic.Int64
}

func startUpstreamStub(t *testing.T, status int) *upstreamStub {
	t.Helper()
	u := &upstreamStub{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, http.StatusText(status))
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return u
}

// deadAddr is a loopback address where nothing listens: connections to it
// are refused. Its port stays taken (bound, never listening) until the
// test ends: a port merely freed could be handed to the next listener the
// test opens (nginx's own, once: nginx then proxied to itself).
func deadAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}

// Through deploy/nginx.conf, an instance answering 503 (koe draining) and
// a dead one do not reach clients: every request is answered by the
// healthy instance, the 503 one is tried once and then left alone for
// fail_timeout (the passive check), and the dead one costs no wait.
func TestNginxSkipsDrainingAndDeadInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nginx")
	}
	good := startUpstreamStub(t, http.StatusOK)
	draining := startUpstreamStub(t, http.StatusServiceUnavailable)
	addr := startNginx(t, []string{draining.addr, deadAddr(t), good.addr})
	const requests = 60
	for i := range requests {
		resp, err := http.Get(httpURL(addr) + "/api/sessions")
		if err != nil {
			t.Fatalf("request %d through nginx: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d through nginx: %s (an unwell instance's answer reached the client)", i, resp.Status)
		}
	}
	// Round robin over three would give the draining one a third. The
	// passive check leaves it one request per fail_timeout (10 s); the
	// bound is loose, so that a stalled machine does not fail the test.
	if n := draining.hits.Load(); n > requests/6 {
		t.Errorf("the instance answering 503 got %d of %d requests: nginx keeps sending it traffic", n, requests)
	}
	if n := good.hits.Load(); n != requests {
		t.Errorf("the healthy instance answered %d of %d requests", n, requests)
	}
}

// Plain HTTP to nginx is sent to https, path and query kept.
func TestNginxRedirectsToHTTPS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nginx")
	}
	good := startUpstreamStub(t, http.StatusOK)
	n := runNginx(t, []string{good.addr, good.addr, good.addr})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get("http://" + n.plain + "/chat?lang=en")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	host, _, _ := net.SplitHostPort(n.plain)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "https://"+host+"/chat?lang=en" {
		t.Errorf("plain HTTP: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	if good.hits.Load() != 0 {
		t.Error("a plain HTTP request reached koe")
	}
}
