package server_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"koe/app"
	"koe/config"
	"koe/testkit/fakellm"
	"koe/testkit/tlstest"
)

// tlsKoe is a koe serving TLS with certificate files the test may rewrite.
type tlsKoe struct {
	*app.Main
	certFile, keyFile string
	trust             *tls.Config // trusts every certificate the test made
}

// makeCert makes a certificate with serial and fails the test otherwise.
func makeCert(t testing.TB, serial int64, key tlstest.Key) *tlstest.Cert {
	t.Helper()
	c, err := tlstest.Make(serial, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startTLSKoe starts koe with server.tls_cert and tls_key holding first;
// later ones are certificates the client trusts too (the ones the test
// swaps in).
func startTLSKoe(t *testing.T, edit func(*config.Config), first *tlstest.Cert, later ...*tlstest.Cert) *tlsKoe {
	t.Helper()
	llm := startLLM(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: []string{"Hello ", "back."}} })
	cfg := testConfig(t, t.TempDir(), llm.URL())
	k := &tlsKoe{trust: tlstest.ClientConfig(append([]*tlstest.Cert{first}, later...)...)}
	var err error
	if k.certFile, k.keyFile, err = first.Write(t.TempDir(), "koe"); err != nil {
		t.Fatal(err)
	}
	cfg.Server.TLSCert, cfg.Server.TLSKey = k.certFile, k.keyFile
	if edit != nil {
		edit(&cfg)
	}
	k.Main = startKoe(t, cfg)
	return k
}

// install writes c over the files koe reads.
func (k *tlsKoe) install(t *testing.T, c *tlstest.Cert) {
	t.Helper()
	if err := os.WriteFile(k.certFile, c.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.keyFile, c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (k *tlsKoe) client() *http.Client {
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: k.trust.Clone()},
		// The token redirect is what the test looks at.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// With server.tls_cert and tls_key, koe's port speaks HTTPS and WSS: the
// API, a WebSocket conversation, /metrics with the certificate's expiry,
// and the token cookie marked Secure.
func TestTLSServesHTTPSAndWSS(t *testing.T) {
	cert := makeCert(t, 101, tlstest.ECDSAP256)
	k := startTLSKoe(t, func(cfg *config.Config) { cfg.Server.AuthToken = testToken }, cert)
	addr := k.Addr()
	hc := k.client()

	req, _ := http.NewRequest("GET", "https://"+addr+"/api/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTPS to koe: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 101 {
		t.Fatalf("GET /api/sessions over TLS: %s, TLS %v", resp.Status, resp.TLS != nil)
	}

	// A page opened with ?token= over TLS: the cookie is Secure, and the
	// browser is sent to the address without the token.
	resp, err = hc.Get("https://" + addr + "/?lang=en&token=" + testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	setCookie := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?lang=en" ||
		!strings.Contains(setCookie, "koe_token=") || !strings.Contains(strings.ToLower(setCookie), "secure") {
		t.Errorf("?token= over TLS: %s, Location %q, Set-Cookie %q", resp.Status, resp.Header.Get("Location"), setCookie)
	}

	// metrics: the seconds to the certificate's end (tlstest.Validity,
	// less the time this test took).
	req, _ = http.NewRequest("GET", "https://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var left float64
	// The series carries the instance's label (koe_instance), as every one does.
	_, sample, _ := strings.Cut(string(body), "\nkoe_tls_certificate_expiry_seconds{")
	_, sample, _ = strings.Cut(sample, "} ")
	if _, err := fmt.Sscanf(sample, "%g", &left); err != nil ||
		left > tlstest.Validity.Seconds() || left < tlstest.Validity.Seconds()-3600 {
		t.Errorf("/metrics: koe_tls_certificate_expiry_seconds is not the certificate's (%v):\n%s", err, grepLines(string(body), "koe_tls"))
	}

	// A WebSocket conversation over TLS, the token as a subprotocol.
	d := websocket.Dialer{TLSClientConfig: k.trust.Clone(), Subprotocols: []string{"koe.v1", "koe.token." + testToken}}
	c := dialURL(t, &d, "wss://"+addr+"/client-ws", nil)
	for range 5 {
		c.next()
	}
	if frames := c.turn("hello over TLS"); len(frames) == 0 {
		t.Fatal("no turn over WSS")
	}

	// Plain HTTP on the TLS port gets no answer koe would give in clear.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, _ = io.WriteString(raw, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	line, _ := bufio.NewReader(raw).ReadString('\n')
	if strings.Contains(line, "200") {
		t.Errorf("koe answered plain HTTP on its TLS port: %q", line)
	}
}

// grepLines returns the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A reload takes a renewed certificate for new handshakes; a pair that
// does not load (a key of another certificate, a truncated file) is
// refused and the certificate in service kept.
func TestTLSReloadKeepsAGoodCertificate(t *testing.T) {
	first, second := makeCert(t, 1, tlstest.ECDSAP256), makeCert(t, 2, tlstest.RSA2048)
	k := startTLSKoe(t, nil, first, second)
	if got := tlstest.Serial(t, k.Addr(), k.trust); got != 1 {
		t.Fatalf("serial %d served at start, want 1", got)
	}
	// A connection open across the reload keeps working.
	hc := k.client()
	get := func() {
		t.Helper()
		resp, err := hc.Get("https://" + k.Addr() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get()

	k.install(t, second)
	if err := k.Reload(); err != nil {
		t.Fatalf("reload of a good pair: %v", err)
	}
	if got := tlstest.Serial(t, k.Addr(), k.trust); got != 2 {
		t.Fatalf("serial %d served after the reload, want 2", got)
	}
	get()

	third := makeCert(t, 3, tlstest.ECDSAP256)
	for _, bad := range []struct {
		name      string
		cert, key []byte
		want      string
	}{
		{"a key of another certificate", third.CertPEM, second.KeyPEM, "server.tls_cert"},
		{"a truncated certificate", third.CertPEM[:len(third.CertPEM)/2], third.KeyPEM, "server.tls_cert"},
		{"an empty key", third.CertPEM, nil, "server.tls_key"},
	} {
		if err := os.WriteFile(k.certFile, bad.cert, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(k.keyFile, bad.key, 0o600); err != nil {
			t.Fatal(err)
		}
		err := k.Reload()
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("reload of %s: %v, want an error naming %s", bad.name, err, bad.want)
		}
		if got := tlstest.Serial(t, k.Addr(), k.trust); got != 2 {
			t.Fatalf("after a failed reload (%s) koe serves serial %d, want 2 (the one it had)", bad.name, got)
		}
	}
}

// Over TLS, the connection cap works as in clear: a probe in the reserve
// past server.max_connections gets its answer and anything else a 503, and
// a connection past the reserve gets the 503 from a rejecter, after the
// handshake that the rejecter makes.
func TestTLSConnectionLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reserve int
		want    [][2]string // path, status; in this order
	}{
		// The probe first: a connection given the reserve is counted off
		// only once koe has seen it close, so a refused request before it
		// could still hold the reserve when the probe comes.
		{"reserve", 1, [][2]string{{"/healthz", "200"}, {"/api/sessions", "503"}}},
		{"no reserve", 0, [][2]string{{"/healthz", "503"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := startTLSKoe(t, func(cfg *config.Config) {
				cfg.Server.MaxConnections = 1
				cfg.Server.HealthConnections = tc.reserve
			}, makeCert(t, 7, tlstest.ECDSAP256))
			// One connection holds the only place (its handshake is done:
			// koe has admitted it).
			held, err := tls.Dial("tcp", k.Addr(), k.trust)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			for _, pw := range tc.want {
				path, want := pw[0], pw[1]
				c, err := tls.Dial("tcp", k.Addr(), k.trust)
				if err != nil {
					t.Fatalf("TLS past the cap: %v", err)
				}
				_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+k.Addr()+"\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatalf("GET %s past the cap: %v", path, err)
				}
				resp.Body.Close()
				c.Close()
				if !strings.HasPrefix(resp.Status, want) {
					t.Errorf("GET %s past the cap: %s, want %s", path, resp.Status, want)
				}
			}
		})
	}
}
