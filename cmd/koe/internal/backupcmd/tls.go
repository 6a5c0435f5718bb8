package backupcmd

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// pinnedClient is an HTTPS client for the koe on this machine that serves
// TLS with certFile (server.tls_cert). It is reached at a loopback address
// the certificate need not name, so instead of checking names it accepts
// exactly the certificate koe was configured with: a certificate anyone
// else presents is refused. After a renewal that koe has not reloaded yet
// (SIGHUP), the two differ, and the error says so.
func pinnedClient(certFile string) (*http.Client, error) {
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read server.tls_cert to reach koe over TLS: %w", err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("server.tls_cert %s holds no PEM certificate", certFile)
	}
	want := block.Bytes
	if _, err := x509.ParseCertificate(want); err != nil {
		return nil, fmt.Errorf("server.tls_cert %s: %w", certFile, err)
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Names are not checked (see above); the certificate is, whole.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], want) {
				return errNotPinned
			}
			return nil
		},
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr}, nil
}

var errNotPinned = errors.New("koe presented a certificate other than server.tls_cert's " +
	"(renewed and not reloaded yet? systemctl reload koe, or kill -HUP, rereads it)")
