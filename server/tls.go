package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// koe serves HTTPS and WSS on its own port when server.tls_cert and
// server.tls_key are set: a browser gives a page its microphone only on
// https (or on localhost), and a token sent over plain HTTP beyond the
// machine can be read on the way. The certificate is reread on SIGHUP
// (ReloadTLS), so that a renewed one is taken without a restart; new
// handshakes get it, open connections keep theirs.

// certExpiryWarning is how close to its end a certificate is logged as a
// warning rather than as news.
const certExpiryWarning = 14 * 24 * time.Hour

// Certificate is a loaded key pair with its parsed leaf.
type Certificate struct {
	pair *tls.Certificate
	leaf *x509.Certificate
}

// NotAfter is when the certificate expires.
func (c *Certificate) NotAfter() time.Time { return c.leaf.NotAfter }

// LoadCertificate reads a PEM certificate (chain) and its PEM private key.
// Its errors name the configuration key and the file, so that an operator
// knows which of the two to fix.
func LoadCertificate(certFile, keyFile string) (*Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("server.tls_cert: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("server.tls_key: %w", err)
	}
	if !strings.Contains(string(certPEM), "-----BEGIN CERTIFICATE-----") {
		return nil, fmt.Errorf("server.tls_cert %s holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")", certFile)
	}
	if !strings.Contains(string(keyPEM), "PRIVATE KEY-----") {
		return nil, fmt.Errorf("server.tls_key %s holds no PEM private key (\"-----BEGIN ... PRIVATE KEY-----\")", keyFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("server.tls_cert %s and server.tls_key %s are not a usable pair: %w", certFile, keyFile, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("server.tls_cert %s: %w", certFile, err)
		}
		pair.Leaf = leaf
	}
	return &Certificate{pair: &pair, leaf: leaf}, nil
}

// certStore holds the certificate new handshakes get; reload swaps it
// whole, so that a handshake never sees half of an old and half of a new
// pair.
type certStore struct {
	certFile, keyFile string
	log               *slog.Logger
	cur               atomic.Pointer[Certificate]
}

func newCertStore(certFile, keyFile string, log *slog.Logger) (*certStore, error) {
	cs := &certStore{certFile: certFile, keyFile: keyFile, log: log}
	c, err := LoadCertificate(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cs.cur.Store(c)
	cs.logLoaded("TLS certificate loaded", c)
	return cs, nil
}

// reload rereads the files; a pair that does not load leaves the current
// one serving.
func (cs *certStore) reload() error {
	c, err := LoadCertificate(cs.certFile, cs.keyFile)
	if err != nil {
		old := cs.cur.Load()
		cs.log.Error("TLS certificate reload failed; koe keeps serving the certificate it had",
			"err", err, "serial", serialOf(old.leaf), "not_after", old.leaf.NotAfter)
		return err
	}
	cs.cur.Store(c)
	cs.logLoaded("TLS certificate reloaded", c)
	return nil
}

func (cs *certStore) logLoaded(msg string, c *Certificate) {
	attrs := []any{"subject", c.leaf.Subject.String(), "dns_names", c.leaf.DNSNames, "serial", serialOf(c.leaf),
		"not_after", c.leaf.NotAfter.UTC().Format(time.RFC3339), "cert", cs.certFile}
	switch left := time.Until(c.leaf.NotAfter); {
	case left <= 0:
		cs.log.Error(msg+", and it has EXPIRED: clients refuse it; renew it and send koe SIGHUP", attrs...)
	case left < certExpiryWarning:
		cs.log.Warn(msg+"; it expires soon: renew it and send koe SIGHUP", append(attrs, "expires_in", left.Round(time.Hour).String())...)
	default:
		cs.log.Info(msg, attrs...)
	}
}

// serialOf is the certificate's serial number in hex, as openssl x509
// -serial shows it.
func serialOf(leaf *x509.Certificate) string {
	return strings.ToUpper(leaf.SerialNumber.Text(16))
}

func (cs *certStore) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return cs.cur.Load().pair, nil
}

// tlsConfig is what koe's port offers: TLS 1.2 and up with Go's default
// suites, HTTP/1.1 only (fasthttp speaks no HTTP/2, and a WebSocket
// upgrade needs HTTP/1.1), session resumption on (Go's default tickets),
// so that a client reconnecting skips the full handshake.
func (cs *certStore) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: cs.getCertificate,
	}
}

// errNoTLS is ReloadTLS's answer when koe serves plain HTTP.
var errNoTLS = errors.New("koe serves no TLS (server.tls_cert and server.tls_key are not set): nothing to reload")

// ReloadTLS rereads server.tls_cert and server.tls_key (on SIGHUP). New
// handshakes get the new certificate; a pair that does not load is logged
// and the current one kept.
func (s *Server) ReloadTLS() error {
	if s.certs == nil {
		return errNoTLS
	}
	return s.certs.reload()
}

// CertificateNotAfter is when the certificate koe serves expires; ok is
// false without TLS.
func (s *Server) CertificateNotAfter() (t time.Time, ok bool) {
	if s.certs == nil {
		return time.Time{}, false
	}
	return s.certs.cur.Load().NotAfter(), true
}

// TLS reports whether koe serves HTTPS and WSS on its port.
func (s *Server) TLS() bool { return s.cfg.TLSCert != "" }

// tlsTrackedConn is a tracked connection that carries TLS: fasthttp finds
// the TLS state through these two methods (c.Protocol() is then "https",
// and the token cookie gets Secure).
type tlsTrackedConn struct{ *trackedConn }

func (c tlsTrackedConn) Handshake() error { return c.Conn.(*tls.Conn).Handshake() }
func (c tlsTrackedConn) ConnectionState() tls.ConnectionState {
	return c.Conn.(*tls.Conn).ConnectionState()
}

// tracked finds the tracking of a connection fasthttp hands a handler.
func tracked(c any) (*trackedConn, bool) {
	switch c := c.(type) {
	case *trackedConn:
		return c, true
	case tlsTrackedConn:
		return c.trackedConn, true
	}
	return nil, false
}
