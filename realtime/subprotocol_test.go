package realtime_test

import (
	"testing"

	"koe/config"
)

// koe's own token subprotocol is taken at /v1/realtime as the docs say:
// offered with "realtime", that is the one chosen (a browser needs one
// echoed); offered alone, none is, as at /client-ws.
func TestRealtimeKoeTokenSubprotocol(t *testing.T) {
	const token = "s3cret-token"
	addr, _ := rtKoe(t, answer("ok"), func(c *config.Config) { c.Server.AuthToken = token })
	c := rtDial(t, addr, "", nil, "realtime", "koe.token."+token)
	if c.ws.Subprotocol() != "realtime" {
		t.Errorf("offered realtime and koe.token: subprotocol %q, want realtime", c.ws.Subprotocol())
	}
	c.expect("session.created")
	alone := rtDial(t, addr, "", nil, "koe.token."+token)
	if alone.ws.Subprotocol() != "" {
		t.Errorf("offered koe.token alone: subprotocol %q, want none", alone.ws.Subprotocol())
	}
	alone.expect("session.created")
}
