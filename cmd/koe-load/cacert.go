package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/gorilla/websocket"
)

// loadCACert reads -cacert: the certificates (PEM) that a wss:// koe or
// nginx is trusted by, for a deployment with a certificate of its own
// making (deploy/make-cert.sh) that the system's roots do not know. The
// system's roots are trusted too. Empty, it leaves o.tls nil.
func (o *options) loadCACert() error {
	if o.caCert == "" {
		return nil
	}
	pemBytes, err := os.ReadFile(o.caCert)
	if err != nil {
		return fmt.Errorf("-cacert: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pemBytes) {
		return fmt.Errorf("-cacert %s holds no PEM certificate", o.caCert)
	}
	o.tls = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return nil
}

// dialer is the WebSocket dialer of the sessions: -tokens' subprotocol
// and -cacert's roots.
func (o options) dialer() websocket.Dialer {
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, TLSClientConfig: o.tls}
	if o.tokens {
		d.Subprotocols = []string{subprotocol}
	}
	return d
}
