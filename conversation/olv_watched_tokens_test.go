package conversation_test

import (
	"encoding/json"
	"strings"
	"testing"

	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
)

// An OLV client asks for no token frames, and its session builds none
// while nobody watches; a watcher that asked for koe's events, here or on
// another instance, still gets every token of the OLV client's reply.
func TestOLVTurnsTokensReachKoeWatchers(t *testing.T) {
	const reply = "Hello there. How are you?"
	t.Run("here", func(t *testing.T) {
		r := newRig(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}))
		w := newCtxWatcher()
		stop, err := r.hub.Watchers().Watch(protocol.WatchTarget{ClientUID: "olv-client"}, w,
			conversation.WatchOptions{ClientUID: "w", KoeEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		olvTurn(t, r)
		var got strings.Builder
		for {
			if tokensUntilEnd(&got, []byte(w.next(t).data)) {
				break
			}
		}
		if got.String() != reply {
			t.Fatalf("the watcher's tokens read %q, want %q", got.String(), reply)
		}
	})
	t.Run("relayed", func(t *testing.T) {
		relay := &fakeRelay{sent: make(chan conversation.RelayedFrame, 1<<12)}
		r := newRig(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(reply)}),
			func(d *conversation.Deps) { d.WatchRelay = relay })
		olvTurn(t, r)
		var got strings.Builder
		for {
			fr := relay.next(t)
			if fr.ClientUID != "olv-client" {
				continue
			}
			if tokensUntilEnd(&got, fr.Data) {
				break
			}
		}
		if got.String() != reply {
			t.Fatalf("the relayed tokens read %q, want %q", got.String(), reply)
		}
	})
}

// tokensUntilEnd adds frame's content to got if it is a token frame, and
// reports whether it ends the chain. What is not a frame (a relayed
// greeting or stop carries none) is neither.
func tokensUntilEnd(got *strings.Builder, frame []byte) bool {
	var f struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	if json.Unmarshal(frame, &f) != nil {
		return false
	}
	if f.Type == protocol.TypeToken {
		var tok protocol.Token
		if json.Unmarshal(frame, &tok) == nil {
			got.WriteString(tok.Content)
		}
	}
	return f.Type == protocol.TypeControl && string(f.Text) == `"`+protocol.ControlChainEnd+`"`
}
