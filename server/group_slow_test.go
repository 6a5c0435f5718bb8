package server_test

import (
	"encoding/json"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	gwebsocket "github.com/gorilla/websocket"

	"koe/config"
	"koe/protocol"
	"koe/testkit/fakellm"
)

// Tests of what a round's audience gets: a member whose client has
// stopped reading, a chat API stream of replies that fail.

// receiveBuffer dials with a kernel receive buffer of size bytes: forced
// past net.core.rmem_max where koe's tests run as root, else as large as
// that allows.
func receiveBuffer(size int) func(network, addr string) (net.Conn, error) {
	nd := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			if syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, size) != nil {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
			}
		})
	}}
	return nd.Dial
}

// stalledMember connects a client with a small receive window, reads its
// greeting for its client_uid, and then reads nothing more: what koe
// sends it piles up in koe.
func stalledMember(t *testing.T, addr string) (ws *websocket.Conn, uid string) {
	t.Helper()
	d := *websocket.DefaultDialer
	d.NetDial = receiveBuffer(4096)
	ws, _, err := d.Dial("ws://"+addr+"/client-ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	_ = ws.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("the stalled member's greeting: %v", err)
		}
		var f msg
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		if f.typ() == "set-model-and-conf" {
			uid = f.str("client_uid")
		}
		if isControl("start-mic")(f) {
			return ws, uid
		}
	}
}

// A member whose client reads nothing does not hold up the round: the
// speaker's client and the other member get the reply as it is made, in
// its order, and the stalled member is disconnected as a watcher that
// fell behind is (its leaving then stops the round, as any member's
// does). write_timeout is long: a member waited for would hold everyone
// past the test's hang guard. Bob's client has a receive buffer far larger
// than the stalled one's, so that it cannot be the one that falls behind
// when the machine is too busy to run its reader for a while: the round
// stops as soon as the stalled member is dropped, before Bob's backlog
// can reach the stalled member's.
func TestGroupStalledMemberDoesNotHoldTheRound(t *testing.T) {
	long := strings.Repeat("La la la. ", 300)
	addr, _ := startGroupKoe(t, func(req fakellm.Request) fakellm.Reply {
		if groupSpeakerOf(req) == "Alice" {
			return fakellm.Reply{Tokens: fakellm.Words(long)}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Short.")}
	}, func(c *config.Config) {
		c.Server.WatcherQueueBytes = 1 << 20
		c.Server.WriteTimeout = 5 * time.Minute
	}, "Alice", "Bob")
	bob := *gwebsocket.DefaultDialer
	bob.NetDial = receiveBuffer(16 << 20)
	a, b := pairUpWith(t, addr, &bob)
	_, cara := stalledMember(t, addr)
	a.send(msg{"type": "add-client-to-group", "invitee_uid": cara})
	a.expectResult(true, "Successfully added")
	b.expectUpdate(false, a.uid, b.uid, cara)

	a.send(msg{"type": "text-input", "text": "Sing for us", "images": []any{}})
	left := func(f msg) bool {
		return f.typ() == "group-operation-result" && strings.Contains(f.str("message"), "Member "+cara+" disconnected")
	}
	own := a.until(left)
	forwarded := b.until(left)
	pieces := func(fs []msg, fwd bool) []string {
		var out []string
		for _, f := range fs {
			if f.typ() == "audio" && f["forwarded"] == fwd {
				dt, _ := f["display_text"].(map[string]any)
				text, _ := dt["text"].(string)
				out = append(out, text)
			}
		}
		return out
	}
	mine, his := pieces(own, false), pieces(forwarded, true)
	if len(his) == 0 || len(mine) < len(his) {
		t.Fatalf("Alice's client got %d of her pieces, Bob's %d forwarded", len(mine), len(his))
	}
	for i := range his {
		if his[i] != mine[i] {
			t.Fatalf("Bob's piece %d is %q, Alice's %q: out of order", i, his[i], mine[i])
		}
	}
}

// A chat API post into a group whose replies fail: the stream reports
// each failure as an error event (200 and end alone said nothing), and
// every member's client gets the error frame of each reply, its own
// character's and the other's.
func TestGroupChatStreamReportsFailedReplies(t *testing.T) {
	addr, _ := startGroupKoe(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Status: 400, ErrorMessage: "the model is not loaded"}
	}, nil, "Alice", "Bob")
	a, b := pairUp(t, addr)
	evs := openStream(t, addr, msg{"group_id": "group_" + a.uid, "message": "Anyone there?", "name": "Viewer"}).all()
	errs := 0
	for _, ev := range evs {
		if ev.Type == protocol.EventError {
			errs++
		}
	}
	if errs != 2 {
		t.Errorf("the stream got %d error events, want one per failed reply (2): %q", errs, describe(evs))
	}
	for _, m := range []*groupMember{a, b} {
		m.until(isType("error"))
		m.until(isType("error"))
	}
}
