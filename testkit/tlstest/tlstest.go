// Package tlstest makes certificates for tests that serve TLS: a
// self-signed leaf for 127.0.0.1 and localhost, made with crypto/x509 at
// test time (no key is committed), with a serial of the test's choosing
// so that a test can tell which certificate a handshake got.
package tlstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"testing"
)

// Key is the kind of private key a certificate is made with.
type Key int

const (
	ECDSAP256 Key = iota
	RSA2048
)

// Validity is how long a made certificate is valid: long enough that koe
// does not warn of its end.
const Validity = 90 * 24 * time.Hour

// Cert is a made certificate, in PEM and parsed.
type Cert struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
}

// Make makes a self-signed certificate for 127.0.0.1, ::1 and localhost
// with the given serial, valid from an hour ago for Validity.
func Make(serial int64, key Key) (*Cert, error) {
	var priv crypto.Signer
	var err error
	switch key {
	case RSA2048:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return nil, fmt.Errorf("tlstest: key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "koe test", Organization: []string{fmt.Sprintf("koe test %d", serial)}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // its own root: a client trusts it in RootCAs
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return nil, fmt.Errorf("tlstest: certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("tlstest: key: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Leaf:    leaf,
	}, nil
}

// Write writes the certificate and key as dir/NAME.crt and dir/NAME.key
// and returns their paths.
func (c *Cert) Write(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, c.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// Pair is the certificate as a server's tls.Certificate.
func (c *Cert) Pair() (tls.Certificate, error) { return tls.X509KeyPair(c.CertPEM, c.KeyPEM) }

// ClientConfig trusts the certificates given, and them alone.
func ClientConfig(certs ...*Cert) *tls.Config {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c.Leaf)
	}
	return &tls.Config{RootCAs: pool}
}

// ServedSerial makes a fresh full handshake with addr (no session to
// resume) and returns the serial of the certificate presented.
func ServedSerial(addr string, trust *tls.Config) (int64, error) {
	cfg := trust.Clone()
	cfg.ClientSessionCache = nil
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return 0, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// Serial is ServedSerial for a test, which it fails on an error.
func Serial(t testing.TB, addr string, trust *tls.Config) int64 {
	t.Helper()
	serial, err := ServedSerial(addr, trust)
	if err != nil {
		t.Fatal(err)
	}
	return serial
}
