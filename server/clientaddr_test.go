package server

import (
	"net/netip"
	"strings"
	"testing"
)

// The client's address: the peer's, unless the peer is a trusted proxy;
// then the rightmost address of X-Forwarded-For that is not a trusted
// proxy. What the client wrote left of that is never believed.
func TestClientAddr(t *testing.T) {
	proxies, err := parseTrustedProxies([]string{"127.0.0.1", "10.0.0.0/8", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		proxies    trustedProxies
		want       string
	}{
		{"no proxies trusted: the header is ignored", "127.0.0.1", []string{"203.0.113.7"}, nil, "127.0.0.1"},
		{"an untrusted peer's header is ignored", "192.0.2.1", []string{"203.0.113.7"}, proxies, "192.0.2.1"},
		{"a trusted proxy names the client", "127.0.0.1", []string{"203.0.113.7"}, proxies, "203.0.113.7"},
		{"the client's own entry left of it is ignored", "127.0.0.1", []string{"6.6.6.6, 203.0.113.7"}, proxies, "203.0.113.7"},
		{"a chain of trusted proxies is skipped", "127.0.0.1", []string{"6.6.6.6, 203.0.113.7, 10.1.2.3, 10.9.9.9"}, proxies, "203.0.113.7"},
		{"header lines are one list, in order", "127.0.0.1", []string{"6.6.6.6", "203.0.113.7, 10.1.2.3"}, proxies, "203.0.113.7"},
		{"a trusted proxy without the header", "127.0.0.1", nil, proxies, "127.0.0.1"},
		{"only trusted hops: the leftmost", "127.0.0.1", []string{"10.1.1.1, 10.2.2.2"}, proxies, "10.1.1.1"},
		{"garbage stops the walk at the last trusted hop", "127.0.0.1", []string{"203.0.113.7, nonsense, 10.2.2.2"}, proxies, "10.2.2.2"},
		{"ports and brackets", "127.0.0.1", []string{"[2001:db8::1]:443, 203.0.113.7:5678"}, proxies, "203.0.113.7"},
		{"IPv6 behind an IPv6 proxy", "fd00::5", []string{"2001:db8::1"}, proxies, "2001:db8::1"},
		{"an IPv4-mapped peer is the IPv4 proxy", "::ffff:127.0.0.1", []string{"203.0.113.7"}, proxies, "203.0.113.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines [][]byte
			for _, l := range tc.xff {
				lines = append(lines, []byte(l))
			}
			got := tc.proxies.clientAddr(netip.MustParseAddr(tc.peer), lines)
			if got.String() != tc.want {
				t.Errorf("client %s, want %s", got, tc.want)
			}
		})
	}
}

// A bad entry of server.trusted_proxies is refused naming the key.
func TestTrustedProxiesValidated(t *testing.T) {
	cfg := DefaultConfig()
	for _, bad := range []string{"nginx.lan", "10.0.0.0/33", "", "10.0.0.1:80"} {
		cfg.TrustedProxies = []string{bad}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "server.trusted_proxies") {
			t.Errorf("%q: %v, want an error naming server.trusted_proxies", bad, err)
		}
	}
	cfg.TrustedProxies = []string{"10.0.0.5", "172.16.0.0/12", "::1"}
	if err := cfg.Validate(); err != nil {
		t.Errorf("good entries refused: %v", err)
	}
}
