package realtimesdk_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"koe/testkit/realtimesdk"
	"koe/testkit/tlstest"
)

// seen is what the echo server saw of the SDK's connection.
type seen struct {
	mu             sync.Mutex
	path, model    string
	auth, betaHead string
}

// echoServer is a TLS WebSocket server that greets with session.created
// and answers every client event with an "echo" event carrying it.
func echoServer(t *testing.T) (realtimesdk.Target, *seen) {
	t.Helper()
	cert, err := tlstest.Make(7, tlstest.ECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := cert.Pair()
	if err != nil {
		t.Fatal(err)
	}
	s := &seen{}
	up := websocket.Upgrader{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.path, s.model, s.auth, s.betaHead = r.URL.Path, r.URL.Query().Get("model"), r.Header.Get("Authorization"), r.Header.Get("OpenAI-Beta")
		s.mu.Unlock()
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.WriteJSON(map[string]any{"type": "session.created", "event_id": "e0", "session": map[string]any{"id": "sess_1"}})
		for {
			var ev map[string]any
			if err := c.ReadJSON(&ev); err != nil {
				return
			}
			_ = c.WriteJSON(map[string]any{"type": "echo", "got": ev})
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	certFile, _, err := cert.Write(t.TempDir(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	return realtimesdk.For(srv.Listener.Addr().String(), "tok-123", certFile), s
}

// The harness drives the SDK's own client: it connects over wss trusting
// the test's certificate, to BASE/realtime?model=…, with the token as a
// bearer; it sends the script's events, fills ${…} from the events
// received, and returns every server event in order. The beta client adds
// its OpenAI-Beta header.
func TestHarnessDrivesTheSDK(t *testing.T) {
	target, s := echoServer(t)
	events := realtimesdk.Run(t, target, "echo", realtimesdk.Script{Model: "mio", Steps: []realtimesdk.Step{
		realtimesdk.Wait("session.created"),
		realtimesdk.Send(map[string]any{"type": "session.update", "session": map[string]any{"instructions": "for ${session.created.session.id}"}}),
		realtimesdk.Wait("echo"),
	}})
	if got := realtimesdk.Types(events); !reflect.DeepEqual(got, []string{"session.created", "echo"}) {
		t.Fatalf("events %q", got)
	}
	var echo struct {
		Got struct {
			Type    string `json:"type"`
			Session struct {
				Instructions string `json:"instructions"`
			} `json:"session"`
		} `json:"got"`
	}
	events[1].Decode(t, &echo)
	if echo.Got.Type != "session.update" || echo.Got.Session.Instructions != "for sess_1" {
		t.Errorf("the server got %s", events[1].Raw)
	}
	s.mu.Lock()
	if s.path != "/v1/realtime" || s.model != "mio" || s.auth != "Bearer tok-123" || s.betaHead != "" {
		t.Errorf("GA connection: path %q, model %q, auth %q, OpenAI-Beta %q", s.path, s.model, s.auth, s.betaHead)
	}
	s.mu.Unlock()

	realtimesdk.Run(t, target, "echo-beta", realtimesdk.Script{API: "beta", Steps: []realtimesdk.Step{realtimesdk.Wait("session.created")}})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.betaHead != "realtime=v1" || s.model != "koe" {
		t.Errorf("beta connection: OpenAI-Beta %q, model %q", s.betaHead, s.model)
	}
	var raw map[string]any
	if err := json.Unmarshal(events[0].Raw, &raw); err != nil || raw["event_id"] != "e0" {
		t.Errorf("the event was not returned whole: %s", events[0].Raw)
	}
}

// The SDK's own types are read for the events each dialect defines.
func TestServerEventTypes(t *testing.T) {
	ga := realtimesdk.ServerEventTypes(t, "ga")
	beta := realtimesdk.ServerEventTypes(t, "beta")
	for _, c := range []struct {
		types map[string]bool
		event string
		want  bool
	}{
		{ga, "response.output_audio.delta", true}, {ga, "response.audio.delta", false},
		{ga, "conversation.item.done", true}, {ga, "response.mcp_call.completed", true},
		{ga, "conversation.item.retrieved", true}, {ga, "error", true},
		{beta, "response.audio.delta", true}, {beta, "response.output_audio.delta", false},
		{beta, "conversation.item.created", true}, {beta, "conversation.item.done", false},
		{beta, "response.function_call_arguments.done", true}, {beta, "response.mcp_call.completed", false},
	} {
		if c.types[c.event] != c.want {
			t.Errorf("%s: defined %v, want %v", c.event, c.types[c.event], c.want)
		}
	}
	if len(ga) < 40 || len(beta) < 30 {
		t.Errorf("%d GA and %d beta event types: the declarations were not read whole", len(ga), len(beta))
	}
}

// The fields each event requires are read from the SDK's interfaces: an
// event lacking one, or holding null where its type admits none, is
// named.
func TestServerEventFields(t *testing.T) {
	ga := realtimesdk.ServerEventFields(t, "ga")
	for _, c := range []struct {
		raw  string
		want string
	}{
		{`{"type":"conversation.item.input_audio_transcription.completed","event_id":"e","item_id":"i","content_index":0,"transcript":"hi"}`, "usage"},
		{`{"type":"conversation.item.input_audio_transcription.completed","event_id":"e","item_id":"i","content_index":0,"transcript":"hi","usage":{"type":"duration","seconds":1}}`, ""},
		{`{"type":"conversation.item.retrieved","event_id":"e","item":null}`, "item (null)"},
		{`{"type":"conversation.item.added","event_id":"e","item":{},"previous_item_id":null}`, ""},
	} {
		missing, err := realtimesdk.MissingFields(ga, json.RawMessage(c.raw))
		if err != nil || strings.Join(missing, ",") != c.want {
			t.Errorf("%s: missing %q (%v), want %q", c.raw, missing, err, c.want)
		}
	}
}
