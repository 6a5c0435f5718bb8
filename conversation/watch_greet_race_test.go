package conversation_test

import (
	"strings"
	"testing"

	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
)

// A watcher of a client_uid that starts watching as that client connects
// is greeted (the character it will see): here the client's session opens
// and greets its watchers after Watch has looked for it and before the
// watcher is listed, so that neither greeted it and an overlay never
// learnt which model to show. server's TestWatcherFollowsReconnectsAndSwitches
// lost its greeting so under load. Both calls greet synchronously: once
// both have returned, the greeting has been offered or never will be.
func TestWatcherGreetedWhenItsClientConnectsAtOnce(t *testing.T) {
	r := newRig(t, func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: fakellm.Words("Hi.")} })
	var sess *conversation.Session
	defer conversation.SetWatchLooked(func() {
		var err error
		sess, err = r.hub.OpenClient(r.ctx, mock.NewSender(64), conversation.SessionOptions{ClientUID: "racer"})
		if err != nil {
			t.Error(err)
		}
	})()
	w := &chatStopWatcher{got: make(chan offered, 64)}
	stopWatching, err := r.hub.Watchers().Watch(protocol.WatchTarget{ClientUID: "racer"}, w, conversation.WatchOptions{ClientUID: "watcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWatching()
	if sess == nil {
		t.Fatal("the session did not open")
	}
	defer sess.Close()
	var greetings []string
	for len(w.got) > 0 {
		o := <-w.got
		greetings = append(greetings, o.data)
	}
	n := 0
	for _, g := range greetings {
		if strings.Contains(g, `"set-model-and-conf"`) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the watcher was offered %d greetings, want one: %q", n, greetings)
	}
}
