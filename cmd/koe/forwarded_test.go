package main

import (
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/gorilla/websocket"

	"koe/testkit"
)

// Behind Debian's nginx with deploy/nginx.conf (which appends the peer to
// X-Forwarded-For), koe logs the client's own address once nginx is a
// trusted proxy, not nginx's and not the one the client wrote itself.
// The client connects from 127.0.0.2, nginx reaches koe from 127.0.0.1.
func TestClientAddressThroughNginx(t *testing.T) {
	testkit.External(t, "nginx")
	for _, tc := range []struct {
		name, proxies, want string
	}{
		{"nginx trusted", "[127.0.0.1]", "127.0.0.2"},
		{"no proxy trusted", "[]", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := runInProcess(t, "data_dir: "+filepath.ToSlash(t.TempDir())+"\nserver:\n  trusted_proxies: "+tc.proxies+
				"\nasr:\n  engine: none\ncharacter:\n  tts:\n    engine: none\n", noEnv)
			koeAddr := "127.0.0.1:" + k.port
			nginx := startNginx(t, []string{koeAddr, koeAddr, koeAddr})

			// The tests' dialer, which trusts nginx's certificate, from
			// another loopback address.
			d := *websocket.DefaultDialer
			d.NetDial = func(network, addr string) (net.Conn, error) {
				nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
				return nd.Dial(network, addr)
			}
			ws, _, err := d.Dial(wsURL(nginx)+"/client-ws", http.Header{"X-Forwarded-For": {"6.6.6.6"}})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			connected := regexp.MustCompile(`msg="client connected".* ip=(\S+)`)
			ip := testkit.Await(t, "koe logs the client", func() (string, bool) {
				m := connected.FindStringSubmatch(k.log.String())
				if m == nil {
					return "", false
				}
				return m[1], true
			})
			if ip != tc.want {
				t.Errorf("koe logged the client as %s, want %s", ip, tc.want)
			}
		})
	}
}
