package server

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// Who the client is, behind proxies. A request's peer is the proxy when
// koe runs behind one (nginx), so koe takes the client's address from
// X-Forwarded-For, but only from the proxies server.trusted_proxies
// names: anyone else could write any address there. Each proxy appends
// the address it got the request from, so the list is read from the
// right: the first address that is not a trusted proxy is the client;
// what lies left of it was written by the client itself and is ignored.
//
// Fiber's own proxy support (EnableTrustedProxyCheck, ProxyHeader) is not
// used: its IP() takes the leftmost address of the header, which is the
// one the client wrote whenever the proxy appends (nginx's
// $proxy_add_x_forwarded_for), and contrib/websocket copies it at the
// upgrade. koe reads the peer from the connection itself, so the
// connection-limiting listener's wrapping changes nothing.

// headerForwardedFor is the header proxies name the client in.
const headerForwardedFor = "X-Forwarded-For"

// trustedProxies are server.trusted_proxies, parsed.
type trustedProxies []netip.Prefix

// parseTrustedProxies reads addresses (a single proxy) and CIDR ranges.
func parseTrustedProxies(list []string) (trustedProxies, error) {
	out := make(trustedProxies, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("server.trusted_proxies entry %q: give an IP address (10.0.0.5) or a CIDR range (10.0.0.0/24, fd00::/8) of your proxies", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func (t trustedProxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the client's address of a request whose peer is peer and
// whose X-Forwarded-For header lines are forwarded, in order.
func (t trustedProxies) clientAddr(peer netip.Addr, forwarded [][]byte) netip.Addr {
	client := peer.Unmap()
	if len(t) == 0 || !t.trusts(client) {
		return client
	}
	for i := len(forwarded) - 1; i >= 0; i-- {
		hops := bytes.Split(forwarded[i], []byte{','})
		for j := len(hops) - 1; j >= 0; j-- {
			hop, ok := parseHop(string(bytes.TrimSpace(hops[j])))
			if !ok {
				// Garbage left of a trusted hop: nothing further left
				// can be believed; the last trusted hop is the client.
				return client
			}
			client = hop
			if !t.trusts(hop) {
				return client
			}
		}
	}
	// Every hop is a trusted proxy: the leftmost is as far as it goes.
	return client
}

// parseHop reads one address of X-Forwarded-For: bare, or with a port as
// some proxies write it (1.2.3.4:5678, [2001:db8::1]:80).
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// clientIP is the address of c's client, for the log: its peer, or behind
// a trusted proxy the address that proxy forwarded.
func (s *Server) clientIP(c *fiber.Ctx) string {
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return c.Context().RemoteIP().String()
	}
	return s.proxies.clientAddr(peer, c.Request().Header.PeekAll(headerForwardedFor)).String()
}

// clientIPLocal holds the client's address of a WebSocket upgrade for the
// connection's handler (contrib/websocket hands the request's locals
// over; the request itself is gone by then).
const clientIPLocal = "koe.client_ip"

// keepClientIP is the WebSocket route's middleware that notes the
// client's address for its handler.
func (s *Server) keepClientIP(c *fiber.Ctx) error {
	c.Locals(clientIPLocal, s.clientIP(c))
	return c.Next()
}

// socketClientIP is what keepClientIP noted for a WebSocket.
func socketClientIP(local any) string {
	ip, _ := local.(string)
	return ip
}
