package server_test

import (
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/testkit/fakellm"
)

// dialWatcher connects a watcher; query is watch=… or watch_conf=….
func dialWatcher(t *testing.T, addr, query string, koeEvents bool) *client {
	t.Helper()
	d := *websocket.DefaultDialer
	if koeEvents {
		d.Subprotocols = []string{"koe.v1"}
	}
	return dialURL(t, &d, "ws://"+addr+"/client-ws?"+query, nil)
}

// greeted reads a watcher's connect sequence and returns its
// set-model-and-conf.
func (c *client) greeted() msg {
	c.t.Helper()
	got := c.until(isType("set-model-and-conf"))
	if n := c.next(); n.typ() != "group-update" {
		c.t.Fatalf("after set-model-and-conf: %v", n)
	}
	if len(got) != 3 || got[0].typ() != "group-update" || got[1].str("text") != "Connection established" {
		c.t.Fatalf("watcher greeting = %v", types(got))
	}
	return got[2]
}

// watched is what a watcher should see of a speaker's frames: a turn's
// output, in the same order.
func watched(frames []msg, koeEvents bool) []string {
	var out []string
	for _, f := range frames {
		switch f.typ() {
		case "audio", "full-text", "backend-synth-complete", "force-new-message", "tool_call_status", "user-input-transcription":
		case "control":
			if t := f.str("text"); t != "conversation-chain-start" && t != "conversation-chain-end" && t != "interrupt" {
				continue
			}
		case "token", "status", "message", "citations":
			if !koeEvents {
				continue
			}
		default:
			continue
		}
		out = append(out, describeFrame(f))
	}
	return out
}

func describeFrame(f msg) string {
	switch f.typ() {
	case "audio":
		d, _ := f["display_text"].(map[string]any)
		v, _ := f["volumes"].([]any)
		return "audio:" + d["text"].(string) + ":" + strings.Repeat("v", len(v))
	case "control", "full-text":
		return f.typ() + ":" + f.str("text")
	case "token":
		return "token:" + f.str("content")
	}
	return f.typ()
}

func describeFrames(frames []msg) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = describeFrame(f)
	}
	return out
}

// TestWatchersFollowASpeaker: watchers by client_uid and by character
// receive the speaker's turn frames, in the speaker's order and nothing
// else; a koe watcher also gets the token events; a watcher cannot send
// input, and the speaker never notices them.
func TestWatchersFollowASpeaker(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	m := startKoe(t, cfg)
	conf := cfg.Character.ConfUID

	// Watching a client_uid nobody has yet: the watcher waits for it.
	byClient := dialWatcher(t, m.Addr(), "watch=stream-desk", false)
	byConf := dialWatcher(t, m.Addr(), "watch_conf="+url.QueryEscape(conf), false)
	koeWatcher := dialWatcher(t, m.Addr(), "watch=stream-desk", true)
	if g := byConf.greeted(); g.str("conf_uid") != conf {
		t.Fatalf("conf watcher greeted with %v", g)
	}
	byConf.alive()
	byClient.alive() // nothing came before the heartbeat's answer: no greeting yet

	d := *websocket.DefaultDialer
	d.Subprotocols = []string{"koe.v1"}
	speaker := dialURL(t, &d, "ws://"+m.Addr()+"/client-ws?client_uid=stream-desk", nil)
	hello := speaker.until(isType("set-model-and-conf"))
	if uid := hello[len(hello)-1].str("client_uid"); uid != "stream-desk" {
		t.Fatalf("speaker's client_uid = %q, want the one it asked for", uid)
	}
	speaker.until(isControl("start-mic"))
	for _, w := range []*client{byClient, koeWatcher} {
		if g := w.greeted(); g.str("conf_uid") != conf || g.str("client_uid") == "stream-desk" {
			t.Fatalf("client watcher greeted with %v (its own client_uid, the speaker's character)", g)
		}
	}

	frames := speaker.turn("Good evening, chat. How is everyone doing today?")
	want := watched(frames, false)
	if !slices.Contains(want, "backend-synth-complete") || len(want) < 6 {
		t.Fatalf("the speaker's turn has too little to watch: %v", want)
	}
	for name, w := range map[string]*client{"by client": byClient, "by character": byConf} {
		got := describeFrames(w.until(isControl("conversation-chain-end")))
		if !slices.Equal(got, want) {
			t.Fatalf("watcher %s saw\n%v\nwant\n%v", name, got, want)
		}
		w.silent()
	}
	wantKoe := watched(frames, true)
	if got := describeFrames(koeWatcher.until(isControl("conversation-chain-end"))); !slices.Equal(got, wantKoe) {
		t.Fatalf("koe watcher saw\n%v\nwant\n%v", got, wantKoe)
	}

	// Watchers only watch.
	byClient.expectError(msg{"type": "text-input", "text": "let me talk"}, "cannot send input")
	if err := byClient.ws.WriteMessage(websocket.BinaryMessage, make([]byte, 640)); err != nil {
		t.Fatal(err)
	}
	if e := byClient.next(); e.typ() != "error" || !strings.Contains(e.str("message"), "cannot send input") {
		t.Fatalf("binary audio from a watcher answered %v", e)
	}
	byClient.send(msg{"type": "frontend-playback-complete"})
	byClient.silent()
	speaker.silent()
	if n := len(chatRequests(llm)); n != 1 {
		t.Fatalf("the LLM got %d chat requests; only the speaker's one turn should reach it", n)
	}
}

// TestWatcherFollowsReconnectsAndSwitches: a client_uid watcher follows
// its speaker across a reconnect and a character switch, and hears about
// interrupts the speaker made on its own.
func TestWatcherFollowsReconnectsAndSwitches(t *testing.T) {
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		if strings.Contains(contentOf(r), "long") {
			return fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("La la la. ", 2000)), Interval: time.Millisecond}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Fine, thanks.")}
	})
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	if err := os.MkdirAll(cfg.CharactersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	alice := "conf_name: alice\nconf_uid: alice_uid\ncharacter_name: Alice\n"
	if err := os.WriteFile(filepath.Join(cfg.CharactersDir, "alice.yaml"), []byte(alice), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startKoe(t, cfg)
	w := dialWatcher(t, m.Addr(), "watch=desk", false)
	aliceWatcher := dialWatcher(t, m.Addr(), "watch_conf=alice_uid", false)
	aliceWatcher.greeted()

	first := dialURL(t, websocket.DefaultDialer, "ws://"+m.Addr()+"/client-ws?client_uid=desk", nil)
	first.until(isControl("start-mic"))
	w.greeted()
	first.turn("hello")
	w.until(isControl("conversation-chain-end"))

	// The speaker reconnects before koe saw it leave: the new connection
	// takes the client_uid over and the old one is closed.
	second := dialURL(t, websocket.DefaultDialer, "ws://"+m.Addr()+"/client-ws?client_uid=desk", nil)
	second.until(isControl("start-mic"))
	var closeErr *websocket.CloseError
	if _, err := first.read(30 * time.Second); !errors.As(err, &closeErr) || closeErr.Code != websocket.CloseNormalClosure || !strings.Contains(closeErr.Text, "replaced") {
		t.Fatalf("the replaced connection ended with %v", err)
	}
	w.greeted()
	second.turn("again")
	w.until(isControl("conversation-chain-end"))

	// A switch: the watcher is told the new character, and the character
	// watcher of Alice starts hearing this session.
	second.request(msg{"type": "switch-config", "file": "alice.yaml"}, "config-switched")
	if g := w.greeted(); g.str("conf_uid") != "alice_uid" {
		t.Fatalf("after the switch the watcher was greeted with %v", g)
	}

	// The speaker interrupts a long reply itself once its watchers hear
	// it: they are told. (What they had not been written by then is
	// dropped, as for the speaker.)
	second.send(msg{"type": "text-input", "text": "say something long"})
	second.until(isType("audio"))
	for _, x := range []*client{w, aliceWatcher} {
		x.until(isType("audio"))
	}
	second.send(msg{"type": "interrupt-signal", "text": "La la"})
	for _, x := range []*client{w, aliceWatcher} {
		x.until(isControl("interrupt"))
	}
	second.request(msg{"type": "heartbeat"}, "heartbeat-ack")
}

// TestWatchQueryRefusedBeforeUpgrade: a target that cannot be watched, or
// a client_uid that cannot be one, is refused with a status and a reason.
func TestWatchQueryRefusedBeforeUpgrade(t *testing.T) {
	llm := startLLM(t, nil)
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	for query, want := range map[string]int{
		"watch_conf=nobody":                  http.StatusNotFound,
		"watch=" + url.QueryEscape("a b"):    http.StatusBadRequest,
		"watch=" + strings.Repeat("x", 65):   http.StatusBadRequest,
		"watch=a&watch_conf=b":               http.StatusBadRequest,
		"watch=a&client_uid=b":               http.StatusBadRequest,
		"client_uid=" + url.QueryEscape("/"): http.StatusBadRequest,
	} {
		_, resp, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/client-ws?"+query, nil)
		if err == nil || resp == nil || resp.StatusCode != want {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Errorf("%s: err %v, status %d, want %d", query, err, status, want)
		}
	}
	// The connection that is left works.
	dialGreeted(t, m.Addr()).alive()
}

// TestWatchNeedsTheToken: with server.auth_token set, a watcher is a
// client like any other.
func TestWatchNeedsTheToken(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = "s3cret-token-for-watch"
	m := startKoe(t, cfg)
	q := "watch_conf=" + url.QueryEscape(cfg.Character.ConfUID)
	_, resp, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/client-ws?"+q, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a watcher without the token: err %v, resp %v", err, resp)
	}
	w := dialURL(t, websocket.DefaultDialer, "ws://"+m.Addr()+"/client-ws?"+q+"&token=s3cret-token-for-watch", nil)
	w.greeted()
}

// TestSlowWatcherIsDroppedNotTheSpeaker: a watcher that reads nothing is
// disconnected once its queue is full, while its speaker's turns go on.
func TestSlowWatcherIsDroppedNotTheSpeaker(t *testing.T) {
	// Three hundred spoken pieces, some 20 KB of audio each: more than
	// the kernel's socket buffers hold, so the watcher's writer blocks and
	// its own queue has to grow.
	long := strings.Repeat("La la la. ", 300)
	llm := startLLM(t, func(r fakellm.Request) fakellm.Reply {
		if strings.Contains(contentOf(r), "flood") {
			return fakellm.Reply{Tokens: fakellm.Words(long)}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Fine here.")}
	})
	cfg := withFakeSpeech(testConfig(t, t.TempDir(), llm.URL()), llm)
	cfg.Server.WatcherQueueBytes = 64 << 10
	m := startKoe(t, cfg)

	slow, _, err := websocket.DefaultDialer.Dial("ws://"+m.Addr()+"/client-ws?watch=desk", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()

	speaker := dialURL(t, websocket.DefaultDialer, "ws://"+m.Addr()+"/client-ws?client_uid=desk", nil)
	speaker.until(isControl("start-mic"))
	// The speaker reads everything while the watcher reads nothing.
	frames := speaker.turn("flood please")
	if n := len(slices.DeleteFunc(frames, func(f msg) bool { return f.typ() != "audio" })); n < 280 {
		t.Fatalf("the speaker got %d audio frames of about 300", n)
	}
	speaker.turn("and now?")

	_ = slow.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a hang guard
	for {
		_, _, err := slow.ReadMessage()
		if err == nil {
			continue
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the slow watcher was never disconnected")
		}
		break
	}
	// Counted before it was disconnected; the speaker was never dropped.
	got := scrape(t, m.Addr(), nil)
	got.want(t, 1, "koe_queue_drops_total", "queue", "watcher")
	got.want(t, 0, "koe_queue_drops_total", "queue", "websocket")
}
