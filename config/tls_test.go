package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"koe/config"
	"koe/testkit/tlstest"
)

// server.tls_cert and tls_key are checked when the file is read: both or
// neither, files that exist, PEM of the right kind, a key that belongs to
// the certificate. Each error names the key and the file to fix.
func TestTLSFilesCheckedAtLoad(t *testing.T) {
	dir := t.TempDir()
	one, err := tlstest.Make(1, tlstest.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlstest.Make(2, tlstest.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := one.Write(dir, "one")
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := other.Write(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name, cert, key string
		want            []string // in the error; none: loads
	}{
		{"a good pair", certFile, keyFile, nil},
		{"the certificate alone", certFile, "", []string{"server.tls_cert and server.tls_key go together"}},
		{"the key alone", "", keyFile, []string{"server.tls_cert and server.tls_key go together"}},
		{"a missing certificate", missing, keyFile, []string{"server.tls_cert", missing}},
		{"a missing key", certFile, missing, []string{"server.tls_key", missing}},
		{"the files swapped", keyFile, certFile, []string{"server.tls_cert " + keyFile, "no PEM certificate"}},
		{"another certificate's key", certFile, otherKey, []string{"server.tls_cert " + certFile, "server.tls_key " + otherKey, "not a usable pair"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := writeFile(t, t.TempDir(), "conf.yaml", "server:\n  tls_cert: \""+tc.cert+"\"\n  tls_key: \""+tc.key+"\"\n")
			cfg, err := config.Load(conf, true, env(nil))
			if tc.want == nil {
				if err != nil || cfg.Server.TLSCert != tc.cert {
					t.Fatalf("Load: %v (tls_cert %q)", err, cfg.Server.TLSCert)
				}
				return
			}
			if err == nil {
				t.Fatal("Load accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
