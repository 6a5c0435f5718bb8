package conversation_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"

	"koe"
	"koe/conversation"
	"koe/protocol"
	"koe/testkit/fakellm"
)

// countingSender discards what a session sends but counts heartbeat-acks.
type countingSender struct{ acks atomic.Int64 }

func (c *countingSender) Send(_ context.Context, msg any) error {
	if s, ok := msg.(protocol.Simple); ok && s.Type == protocol.TypeHeartbeatAck {
		c.acks.Add(1)
	}
	return nil
}

func (c *countingSender) SendWait(ctx context.Context, msg any) error { return c.Send(ctx, msg) }

// FuzzDispatch feeds arbitrary frames to a session as its read loop does:
// decode, then dispatch. No frame may panic, a refused frame is the
// client's mistake (never an internal error), and the session answers a
// heartbeat after every frame.
func FuzzDispatch(f *testing.F) {
	for _, typ := range []string{
		protocol.TypeTextInput, protocol.TypeInterruptSignal, protocol.TypeFrontendPlaybackComplete,
		protocol.TypeFetchHistoryList, protocol.TypeFetchAndSetHistory, protocol.TypeCreateNewHistory,
		protocol.TypeDeleteHistory, protocol.TypeFetchConfigs, protocol.TypeSwitchConfig, protocol.TypeFetchBackgrounds,
		protocol.TypeRequestInitConfig, protocol.TypeMicAudioData, protocol.TypeMicAudioEnd, protocol.TypeRawAudioData,
		protocol.TypeRawAudioConfig, protocol.TypeAISpeakSignal, protocol.TypeFetchMemoryState,
		protocol.TypeSetCompressionRate, protocol.TypeFetchSystemPrompt, protocol.TypeSetSystemPrompt,
		protocol.TypeFetchReminder, protocol.TypeSetReminder, protocol.TypeFetchContext, protocol.TypeFetchHistoryPage,
		protocol.TypeAddClientToGroup, protocol.TypeAudioPlayStart, "no-such-type",
	} {
		for _, fields := range []map[string]any{
			{},
			{"text": "hi", "history_uid": "../../etc/passwd", "file": "../conf.yaml", "rate": 0.2, "prompt": "p", "reminder": "r"},
			{"audio": []float64{0, 0.5, -1, 1.01}, "sample_rate": 48000, "idle_time": -5, "before": 3, "limit": -1},
			{"images": []map[string]string{{"source": "x", "data": "data:image/png;base64,AAAA", "mime_type": "image/png"}}},
			{"history_uid": "2020-01-01_00-00-00_x", "file": "other.yaml", "rate": 9.0, "sample_rate": 7},
		} {
			fields["type"] = typ
			data, _ := json.Marshal(fields)
			f.Add(data)
		}
	}
	// One session for the whole run: what the fuzzer finds is what a
	// long-lived connection would suffer.
	r := newRig(f, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Sure.")}), quiet())
	var sent countingSender
	sess := r.hub.Open(context.Background(), &sent, conversation.SessionOptions{ClientUID: "fuzz", KoeEvents: true, Logger: slog.New(slog.DiscardHandler)})
	f.Cleanup(sess.Close)
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := protocol.Decode(data)
		if err == nil {
			if err := sess.Dispatch(in); err != nil {
				if p := conversation.Explain(err); p.Kind == koe.Internal {
					t.Fatalf("%q: internal error %v", data, err)
				}
			}
		}
		before := sent.acks.Load()
		if err := sess.Dispatch(protocol.Inbound{Type: protocol.TypeHeartbeat}); err != nil || sent.acks.Load() != before+1 {
			t.Fatalf("no heartbeat-ack after %q (%v)", data, err)
		}
	})
}
