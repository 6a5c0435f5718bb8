package conversation_test

import (
	"errors"
	"strings"
	"testing"

	"koe"
	"koe/conversation"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
)

// TestHubClientUIDClaims: a client reconnecting takes its client_uid back
// from its old connection, which is told to close; nobody takes the
// client_uid of a session without a client of its own (a Realtime
// connection's, the live session), and the live session opened on a
// client's client_uid closes that client.
func TestHubClientUIDClaims(t *testing.T) {
	r := newRig(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Hi.")} })
	open := func(uid string, replaced func(), playsItself bool) (*conversation.Session, error) {
		s, err := r.hub.OpenClient(r.ctx, mock.NewSender(1<<12), conversation.SessionOptions{ClientUID: uid, Replaced: replaced, PlaysItself: playsItself})
		if s != nil {
			t.Cleanup(s.Close)
		}
		return s, err
	}
	refused := func(what, uid string, holder *conversation.Session) {
		t.Helper()
		s, err := open(uid, nil, false)
		var ke *koe.Error
		if s != nil || !errors.As(err, &ke) || ke.Kind != koe.Conflict || !strings.Contains(err.Error(), "client_uid "+uid) {
			t.Errorf("a client asking for %s's client_uid: opened %v, %v; want a conflict naming it", what, s != nil, err)
		}
		if r.hub.Session(uid) != holder {
			t.Errorf("%s's client_uid now names another session", what)
		}
	}

	gone := 0
	first, _ := open("desk", func() { gone++ }, false)
	again, err := open("desk", nil, false)
	if err != nil || again == nil || r.hub.Session("desk") != again || gone != 1 || first == again {
		t.Fatalf("a reconnect: %v, the old one told %d times; want it to take the client_uid", err, gone)
	}

	rt, err := open("sess_rt", nil, true)
	if err != nil || rt == nil {
		t.Fatalf("a Realtime connection's session: %v", err)
	}
	refused("a Realtime connection", "sess_rt", rt)

	squatter, _ := open("live-c1", func() { gone++ }, false)
	live, err := r.hub.OpenLive(r.ctx, conversation.LiveOptions{History: "live-history"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(live.Close)
	held := r.hub.Session("live-c1")
	if held == nil || held == squatter || gone != 2 {
		t.Fatalf("the live session on a client's client_uid: the client told %d times, the client_uid names %p (the client's %p)", gone-1, held, squatter)
	}
	refused("the live session", "live-c1", held)
}
