package backupcmd

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"koe/server"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
	"koe/testkit/tlstest"
)

// A koe serving TLS is asked over HTTPS and trusted for presenting
// exactly server.tls_cert's certificate, at a loopback address that
// certificate need not name; a koe presenting another certificate is
// refused before the token is sent.
func TestBackupOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const token = "backup-tls-token-0123456789"
	certDir := t.TempDir()
	served, err := tlstest.Make(1, tlstest.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := served.Write(certDir, "koe")
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlstest.Make(2, tlstest.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	otherFile, _, err := other.Write(certDir, "other")
	if err != nil {
		t.Fatal(err)
	}

	llm := koetest.StartLLM(t, fakellm.Echo(time.Millisecond))
	data := t.TempDir()
	cfg := koetest.Config(t, data, llm.URL())
	cfg.Server.AuthToken = token
	cfg.Server.TLSCert, cfg.Server.TLSKey = certFile, keyFile
	m := koetest.StartKoe(t, cfg)
	if got := localURL(server.Config{Host: "0.0.0.0", Port: 443, TLSCert: certFile}); got != "https://127.0.0.1:443" {
		t.Fatalf("the address of a koe serving TLS is %s", got)
	}

	out := filepath.Join(t.TempDir(), "koe-backup.db")
	pinned, err := pinnedClient(certFile)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Out: out, Path: filepath.Join(data, DatabaseFile), Koe: "https://" + m.Addr(), Token: token, Client: pinned}
	if _, err := Run(ctx, opts); err != nil {
		t.Fatalf("a backup over TLS: %v", err)
	}

	if opts.Client, err = pinnedClient(otherFile); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, opts); !errors.Is(err, errNotPinned) {
		t.Fatalf("a koe presenting another certificate: %v", err)
	}
}
