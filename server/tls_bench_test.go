package server_test

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/gorilla/websocket"

	"koe/testkit/tlstest"
)

// What a TLS handshake costs with the configuration koe serves (TLS 1.3,
// Go's defaults), client and server in this process: a full handshake, and one resumed from a session ticket, with an
// ECDSA P-256 and an RSA 2048 certificate. ns/op and allocs/op are both
// ends' together, over loopback TCP.
func BenchmarkTLSHandshake(b *testing.B) {
	for _, key := range []struct {
		name string
		key  tlstest.Key
	}{{"ecdsa-p256", tlstest.ECDSAP256}, {"rsa-2048", tlstest.RSA2048}} {
		cert := makeCert(b, 1, key.key)
		pair, err := cert.Pair()
		if err != nil {
			b.Fatal(err)
		}
		server := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
		for _, resume := range []bool{false, true} {
			name := key.name + "/full"
			if resume {
				name = key.name + "/resumed"
			}
			b.Run(name, func(b *testing.B) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				client := tlstest.ClientConfig(cert)
				client.ServerName = "localhost"
				if resume {
					client.ClientSessionCache = tls.NewLRUClientSessionCache(4)
					handshake(b, l, server, client, false) // the ticket to resume from
				}
				b.ReportAllocs()
				for b.Loop() {
					handshake(b, l, server, client, resume)
				}
			})
		}
	}
}

// handshake runs one handshake on a connection to l and reads one byte
// the server sends after it, so that a TLS 1.3 session ticket reaches the
// client.
func handshake(b *testing.B, l net.Listener, server, client *tls.Config, wantResumed bool) {
	cc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	sc, err := l.Accept()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		s := tls.Server(sc, server)
		err := s.Handshake()
		if err == nil {
			_, err = s.Write([]byte{1})
		}
		_ = s.Close()
		done <- err
	}()
	c := tls.Client(cc, client)
	var one [1]byte
	if _, err := c.Read(one[:]); err != nil {
		b.Fatal(err)
	}
	if c.ConnectionState().DidResume != wantResumed {
		b.Fatalf("resumed: %v, want %v", c.ConnectionState().DidResume, wantResumed)
	}
	_ = c.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// What opening a WebSocket to koe costs, over loopback TCP: plain, over
// TLS with a full handshake, and over TLS resumed. Each op dials, gets the
// 101 and closes.
func BenchmarkWebSocketConnect(b *testing.B) {
	for _, mode := range []string{"ws", "wss-full", "wss-resumed"} {
		b.Run(mode, func(b *testing.B) {
			llm := startLLM(b, nil)
			cfg := testConfig(b, b.TempDir(), llm.URL())
			d := websocket.Dialer{}
			url := "ws://"
			if mode != "ws" {
				cert := makeCert(b, 1, tlstest.ECDSAP256)
				certFile, keyFile, err := cert.Write(b.TempDir(), "koe")
				if err != nil {
					b.Fatal(err)
				}
				cfg.Server.TLSCert, cfg.Server.TLSKey = certFile, keyFile
				d.TLSClientConfig = tlstest.ClientConfig(cert)
				if mode == "wss-resumed" {
					d.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(4)
				}
				url = "wss://"
			}
			m := startKoe(b, cfg)
			url += m.Addr() + "/client-ws"
			dial := func() {
				ws, _, err := d.Dial(url, nil)
				if err != nil {
					b.Fatal(err)
				}
				// The first frame: with TLS 1.3, the session ticket arrives
				// before it.
				if _, _, err := ws.ReadMessage(); err != nil {
					b.Fatal(err)
				}
				_ = ws.Close()
			}
			dial()
			b.ReportAllocs()
			for b.Loop() {
				dial()
			}
		})
	}
}
