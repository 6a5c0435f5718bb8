package conversation_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
	"koe/testkit/mock"
)

// TestChatStopInterruptOutlivesTheChat: a chat API turn stopped from
// outside (POST /api/chat/HISTORY/stop) hands its character's watchers
// control: interrupt with a context that is still alive once the chat has
// ended. The server cancels a chat's context as soon as its event stream
// has written the end event; a watcher whose connection had not yet
// written the interrupt by then (a connection drops frames whose context
// has ended) never learnt that the turn had stopped, and an overlay went
// on showing it. koe-load's stop-latency scenario found it: now and then,
// one of 10 watchers on a loaded machine waited for an interrupt that
// never came.
func TestChatStopInterruptOutlivesTheChat(t *testing.T) {
	r := newRig(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: fakellm.Words("La la la. "), Interval: 5 * time.Millisecond, Endless: true}
	})
	w := &chatStopWatcher{got: make(chan offered, 4096)}
	stopWatching, err := r.hub.Watchers().Watch(protocol.WatchTarget{ConfUID: "c1"}, w, conversation.WatchOptions{ClientUID: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	defer stopWatching()

	out := mock.NewSender(1 << 14)
	// The chat's context, as the server gives it: ended once the stream
	// has ended, right after the turn.
	ctx, streamEnded := context.WithCancel(context.Background())
	defer streamEnded()
	chat, err := r.hub.OpenChat(ctx, protocol.ChatRequest{Message: "Tell me a long story."}, out)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- chat.Run() }()
	uid := chatHistoryOf(t, out)
	w.until(t, func(o offered) bool { return strings.HasPrefix(o.data, `{"type":"audio",`) })

	if stopped, err := r.hub.StopHistory(context.Background(), uid); err != nil || !stopped {
		t.Fatalf("StopHistory(%s) = %v, %v", uid, stopped, err)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("the stopped chat turn: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the stopped chat turn did not end")
	}
	streamEnded()
	interrupt := w.until(t, func(o offered) bool { return o.data == `{"type":"control","text":"interrupt"}` })
	if err := interrupt.ctx.Err(); err != nil {
		t.Fatalf("the watchers' interrupt came with a context that ended with the chat (%v): a connection drops it unwritten", err)
	}
}

// chatStopWatcher records what it is offered, with its context; it never
// blocks the session while got has room.
type chatStopWatcher struct{ got chan offered }

func (w *chatStopWatcher) Offer(ctx context.Context, data []byte) {
	w.got <- offered{ctx, string(data)}
}

// until returns the first frame offered from now on that match holds for.
func (w *chatStopWatcher) until(t *testing.T, match func(offered) bool) offered {
	t.Helper()
	for {
		select {
		case o := <-w.got:
			if match(o) {
				return o
			}
		case <-time.After(hangGuard):
			t.Fatalf("the watcher was offered nothing awaited within %s", hangGuard)
		}
	}
}

// chatHistoryOf reads a chat's events until its human message names the
// history the turn runs in.
func chatHistoryOf(t *testing.T, out *mock.Sender) string {
	t.Helper()
	for {
		select {
		case f := <-out.Frames:
			if f.Type != protocol.TypeMessage {
				continue
			}
			var ev protocol.MessageEvent
			if err := json.Unmarshal(f.JSON, &ev); err != nil {
				t.Fatal(err)
			}
			if uid := ev.Content.AdditionalKwargs.HistoryUID; uid != "" {
				return uid
			}
		case <-time.After(hangGuard):
			t.Fatal("the chat's human message did not name its history")
		}
	}
}
