package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"koe/app"
	"koe/coord"
	"koe/livechat"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/ircdtest"
	"koe/testkit/koetest"
	"koe/testkit/redistest"
)

// Log lines the tests wait for.
const (
	logLeads   = "this instance leads"                                          // coord: before the chat starts
	logStopped = "live chat: stopped on this instance"                          // app: after it stopped
	logStandBy = "standing by"                                                  // coord
	logNoRedis = "could not reach redis to take part in the election; retrying" // coord
	logSteps   = "stepped down: the lead could not be renewed for two thirds of coord.lease; another instance may take it once it expires"
)

// liveCluster is several koe instances configured alike with live chat
// on one real IRC server (ngircd) and coord: redis on one real
// redis-server, sharing the fake LLM.
type liveCluster struct {
	t     *testing.T
	irc   *ircdtest.Server
	redis *redistest.Server
	llm   *fakellm.Server
	nodes map[string]*liveNode

	// What the instances logged, and which ran the live chat: on from
	// "this instance leads" (logged before it starts) to "stopped on this
	// instance" (logged after it stopped), so that an overlap of two
	// running chats is an overlap here.
	mu      sync.Mutex
	seen    map[string]int // node + "\x00" + message
	running map[string]bool
	most    int
	change  chan struct{}
}

type liveNode struct {
	name  string
	koe   *app.Main
	addr  string
	proxy *redistest.Proxy // its way to Redis, when the test cuts it
}

func startLiveCluster(t *testing.T) *liveCluster {
	t.Helper()
	c := &liveCluster{
		t: t, irc: ircdtest.Start(t, ""), redis: redistest.Start(t), nodes: map[string]*liveNode{},
		seen: map[string]int{}, running: map[string]bool{}, change: make(chan struct{}),
	}
	c.llm = koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		if !isChatTurn(r.UserWords()) {
			return fakellm.Reply{Tokens: fakellm.Words("A summary.")}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Hi there!")}
	})
	return c
}

// start runs instance name; with proxied, its Redis goes through a proxy
// the test can cut.
func (c *liveCluster) start(name string, proxied bool) *liveNode {
	c.t.Helper()
	n := &liveNode{name: name}
	url := c.redis.URL()
	if proxied {
		n.proxy = redistest.NewProxy(c.t, c.redis)
		url = n.proxy.URL()
	}
	cfg := koetest.WithFakeSpeech(koetest.Config(c.t, c.t.TempDir(), c.llm.URL()), c.llm)
	cfg.LiveChat.Enabled = true
	cfg.LiveChat.Twitch.Channel = "koe"
	cfg.LiveChat.Twitch.Server = fmt.Sprintf("127.0.0.1:%d", c.irc.TLS)
	cfg.LiveChat.Twitch.CAFile = c.irc.CertFile
	cfg.LiveChat.Twitch.ReconnectMin = 50 * time.Millisecond
	cfg.LiveChat.MaxNoteChars = 0 // each turn is the messages alone
	cfg.Server.Metrics = true
	cfg.Coord = coord.DefaultConfig()
	// Long enough that a loaded machine renews in time; takeovers on
	// release do not wait for it.
	cfg.Coord.Backend, cfg.Coord.RedisURL, cfg.Coord.Lease = coord.Redis, url, 2*time.Second
	m := &app.Main{Config: cfg, Logger: slog.New(&clusterLog{c: c, node: name}), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = m.Close() })
	n.koe, n.addr = m, m.Addr()
	c.nodes[name] = n
	return n
}

// clusterLog is a node's slog handler: to the test log, and recorded.
type clusterLog struct {
	c     *liveCluster
	node  string
	attrs []slog.Attr
}

func (h *clusterLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *clusterLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	for _, a := range h.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	h.c.t.Logf("%s %s: %s%s", h.node, r.Level, r.Message, b.String())
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[h.node+"\x00"+r.Message]++
	switch r.Message {
	case logLeads:
		c.running[h.node] = true
	case logStopped:
		c.running[h.node] = false
	}
	n := 0
	for _, on := range c.running {
		if on {
			n++
		}
	}
	c.most = max(c.most, n)
	close(c.change)
	c.change = make(chan struct{})
	return nil
}
func (h *clusterLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &clusterLog{c: h.c, node: h.node, attrs: append(slices.Clip(h.attrs), as...)}
}
func (h *clusterLog) WithGroup(string) slog.Handler { return h }

// waitFor waits until ok holds, under the cluster's lock.
func (c *liveCluster) waitFor(what string, ok func() bool) {
	c.t.Helper()
	deadline := time.After(guard)
	for {
		c.mu.Lock()
		done, ch := ok(), c.change
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			c.t.Fatalf("waiting for %s: not within %s", what, guard)
		}
	}
}

// waitLog waits until node has logged message n times in all.
func (c *liveCluster) waitLog(node, message string, n int) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("%s to log %q %d times", node, message, n), func() bool { return c.seen[node+"\x00"+message] >= n })
}

func (c *liveCluster) logged(node, message string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[node+"\x00"+message]
}

// leader waits until one node runs the live chat and returns it.
func (c *liveCluster) leader() *liveNode {
	c.t.Helper()
	var name string
	c.waitFor("a node running the live chat", func() bool {
		for n, on := range c.running {
			if on {
				name = n
				return true
			}
		}
		return false
	})
	return c.nodes[name]
}

// check fails if two nodes ever ran the live chat at once.
func (c *liveCluster) check() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.most > 1 {
		c.t.Fatalf("%d instances ran the live chat at once", c.most)
	}
}

// call sends method path to n and decodes a 200 answer into out; it
// returns the status code and the body.
func (n *liveNode) call(t testing.TB, method, path string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s %s: %v", n.name, method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s %s: %v in %s", n.name, method, path, err, body)
		}
	}
	return resp.StatusCode, string(body)
}

func (n *liveNode) status(t testing.TB) livechat.Status {
	t.Helper()
	var st livechat.Status
	if code, body := n.call(t, http.MethodGet, "/api/live", &st); code != http.StatusOK {
		t.Fatalf("%s GET /api/live: %d %s", n.name, code, body)
	}
	return st
}

// waitStatus polls n's GET /api/live until ok holds.
func (n *liveNode) waitStatus(t testing.TB, what string, ok func(livechat.Status) bool) livechat.Status {
	t.Helper()
	return testkit.Await(t, n.name+": "+what, func() (livechat.Status, bool) {
		st := n.status(t)
		return st, ok(st)
	})
}

// metric is the value of an unlabelled series in n's /metrics.
func (n *liveNode) metric(t testing.TB, name string) string {
	t.Helper()
	code, body := n.call(t, http.MethodGet, "/metrics", nil)
	if code != http.StatusOK {
		t.Fatalf("%s /metrics: %d", n.name, code)
	}
	for _, line := range strings.Split(body, "\n") {
		// Every series carries the instance's label (koe_instance).
		if rest, ok := strings.CutPrefix(line, name+"{"); ok {
			if _, v, ok := strings.Cut(rest, "} "); ok {
				return v
			}
		}
	}
	t.Fatalf("%s /metrics has no %s", n.name, name)
	return ""
}

// chatTurns are the user words of the LLM requests for chat turns, from
// every node.
func (c *liveCluster) chatTurns() []string {
	var out []string
	for _, r := range c.llm.Requests() {
		if w := r.UserWords(); isChatTurn(w) {
			out = append(out, w)
		}
	}
	return out
}

// followNews subscribes to the channel where instances say what their
// watchers follow; the function it returns waits for news ending with
// suffix.
func (c *liveCluster) followNews() func(suffix string) {
	c.t.Helper()
	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", c.redis.Port)})
	c.t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	c.t.Cleanup(cancel)
	sub := client.Subscribe(ctx, "koe:watch:follow")
	if _, err := sub.Receive(ctx); err != nil {
		c.t.Fatal(err)
	}
	return func(suffix string) {
		c.t.Helper()
		for {
			m, err := sub.ReceiveMessage(ctx)
			if err != nil {
				c.t.Fatalf("waiting for %q on koe:watch:follow: %v", suffix, err)
			}
			if strings.HasSuffix(m.Payload, suffix) {
				return
			}
		}
	}
}

// heardUntilEnd reads a watcher's frames up to the end of a turn and
// returns the text of its audio.
func heardUntilEnd(t testing.TB, ws *websocket.Conn) string {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(guard))
	var said []string
	for {
		var f frame
		if err := ws.ReadJSON(&f); err != nil {
			t.Fatalf("watcher: %v (heard %q)", err, said)
		}
		if f.Type == "audio" && f.DisplayText != nil && f.DisplayText.Text != "" {
			said = append(said, strings.TrimSpace(f.DisplayText.Text))
		}
		if f.Type == "control" && f.Text == "conversation-chain-end" {
			return strings.Join(said, " ")
		}
	}
}

// koeNicks are the live chat clients in #koe (anonymous readers).
func koeNicks(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "justinfan") {
			out = append(out, n)
		}
	}
	return out
}

// idleAfter holds once spoken turns have been spoken and nothing waits.
func idleAfter(spoken uint64) func(livechat.Status) bool {
	return func(st livechat.Status) bool {
		return st.Spoken == spoken && !st.Running && st.Queued == 0
	}
}

// TestLiveChatOneLeader: two instances configured with the same live
// chat: one reads the channel and answers each message once; the other
// stands by, shows the leader's status and forwards the streamer's
// commands to it; when the leader stops, the other takes over at once,
// paused if the streamer had paused, with the messages that waited, and
// answers them and the next message.
func TestLiveChatOneLeader(t *testing.T) {
	c := startLiveCluster(t)
	c.start("A", false)
	c.start("B", false)
	lead := c.leader()
	other := c.nodes["A"]
	if lead.name == "A" {
		other = c.nodes["B"]
	}
	c.waitLog(other.name, logStandBy, 1)
	st := lead.waitStatus(t, "the leader's Twitch source connected", func(st livechat.Status) bool {
		return len(st.Sources) == 1 && st.Sources[0].Connected
	})
	if st.Role != "leader" || st.Leader != st.Instance || st.Instance == "" {
		t.Fatalf("the leader's status: %+v", st)
	}
	// The standing-by instance answers with the leader's status.
	sb := other.status(t)
	if sb.Role != "standby" || sb.Leader != st.Instance || sb.Instance == st.Instance || len(sb.Sources) != 1 || !sb.Sources[0].Connected {
		t.Fatalf("the standing-by instance's status: %+v (leader %s)", sb, st.Instance)
	}
	if v := lead.metric(t, "koe_live_chat_leader"); v != "1" {
		t.Fatalf("the leader's koe_live_chat_leader = %s", v)
	}
	if v := other.metric(t, "koe_live_chat_leader"); v != "0" {
		t.Fatalf("the standing-by instance's koe_live_chat_leader = %s", v)
	}

	// An overlay on the standing-by instance hears the live character
	// (the watch relay carries the leader's turns to it), once the other
	// instances know what it follows.
	conf := other.koe.Config.Character.ConfUID
	follows := c.followNews()
	overlay, resp, err := websocket.DefaultDialer.Dial("ws://"+other.addr+"/client-ws?watch_conf="+conf, nil)
	if err != nil {
		t.Fatalf("watch the live character on %s: %v", other.name, err)
	}
	_ = resp.Body.Close()
	t.Cleanup(func() { _ = overlay.Close() })
	follows("+\nf\n" + conf)

	// One koe reads the channel; each message is answered once.
	alice := ircdtest.NewChatter(t, c.irc.Plain, "alice", "koe")
	if nicks := koeNicks(alice.Names("koe")); len(nicks) != 1 {
		t.Fatalf("koe clients in the channel: %q", nicks)
	}
	alice.Send("PRIVMSG #koe :hello koe")
	if heard := heardUntilEnd(t, overlay); heard != "Hi there!" {
		t.Fatalf("the overlay on the standing-by instance heard %q", heard)
	}
	other.waitStatus(t, "the first message answered", idleAfter(1))
	alice.Send("PRIVMSG #koe :second message")
	other.waitStatus(t, "the second message answered", idleAfter(2))
	if turns := c.chatTurns(); !slices.Equal(turns, []string{chatTurn("alice", "hello koe"), chatTurn("alice", "second message")}) {
		t.Fatalf("the LLM was asked %q", turns)
	}

	// The streamer's commands, sent to the standing-by instance, act on
	// the leader.
	var paused livechat.Status
	if code, body := other.call(t, http.MethodPost, "/api/live/pause", &paused); code != http.StatusOK || !paused.Paused || paused.Role != "standby" {
		t.Fatalf("pause through the standing-by instance: %d %s", code, body)
	}
	if !lead.status(t).Paused {
		t.Fatal("the leader is not paused")
	}
	alice.Send("PRIVMSG #koe :while paused")
	lead.waitStatus(t, "the message queued", func(st livechat.Status) bool { return st.Queued == 1 && st.Spoken == 2 })
	var skip struct {
		Skipped bool            `json:"skipped"`
		Status  livechat.Status `json:"status"`
	}
	if code, body := other.call(t, http.MethodPost, "/api/live/skip", &skip); code != http.StatusOK || skip.Skipped || skip.Status.Queued != 1 {
		t.Fatalf("skip through the standing-by instance: %d %s", code, body)
	}

	// The leader stops: the other takes over at once (the release tells
	// it), still paused.
	stopped := time.Now()
	if err := lead.koe.Close(); err != nil {
		t.Fatal(err)
	}
	c.waitLog(other.name, logLeads, 1)
	took := time.Since(stopped)
	st = other.waitStatus(t, "the new leader's Twitch source connected", func(st livechat.Status) bool {
		return len(st.Sources) == 1 && st.Sources[0].Connected
	})
	t.Logf("%s took over %s after %s began to close", other.name, took.Round(time.Millisecond), lead.name)
	if st.Role != "leader" || !st.Paused || st.Spoken != 0 || st.Queued != 1 {
		t.Fatalf("the new leader's status: %+v (want paused, with the message queued on the old leader)", st)
	}
	if v := other.metric(t, "koe_live_chat_leader"); v != "1" {
		t.Fatalf("the new leader's koe_live_chat_leader = %s", v)
	}
	// The message queued on the old leader is answered by the new one.
	var resumed livechat.Status
	if code, body := other.call(t, http.MethodPost, "/api/live/resume", &resumed); code != http.StatusOK || resumed.Paused {
		t.Fatalf("resume: %d %s", code, body)
	}
	other.waitStatus(t, "the message queued on the old leader answered", idleAfter(1))
	alice.Send("PRIVMSG #koe :are you still there?")
	other.waitStatus(t, "the message after the take-over answered", idleAfter(2))
	turns := c.chatTurns()
	if len(turns) != 4 || turns[2] != chatTurn("alice", "while paused") || turns[3] != chatTurn("alice", "are you still there?") {
		t.Fatalf("the LLM was asked %q", turns)
	}
	c.check()
}

// TestLiveChatLeaderCutOff: the leader loses Redis (as good as dead to
// the others): it stops its live chat before the other instance can take
// the lead, and the other answers the next message.
func TestLiveChatLeaderCutOff(t *testing.T) {
	c := startLiveCluster(t)
	a := c.start("A", true)
	c.waitLog("A", logLeads, 1) // alone: A leads
	b := c.start("B", false)
	c.waitLog("B", logStandBy, 1)
	a.waitStatus(t, "A's Twitch source connected", func(st livechat.Status) bool {
		return len(st.Sources) == 1 && st.Sources[0].Connected
	})
	alice := ircdtest.NewChatter(t, c.irc.Plain, "alice", "koe")
	alice.Send("PRIVMSG #koe :hello koe")
	b.waitStatus(t, "the first message answered", idleAfter(1))

	cut := time.Now()
	a.proxy.Cut()
	c.waitLog("A", logSteps, 1)
	c.waitLog("B", logLeads, 1)
	t.Logf("B took over %s after A was cut off from redis (coord.lease 2s)", time.Since(cut).Round(time.Millisecond))
	c.check()
	b.waitStatus(t, "B's Twitch source connected", func(st livechat.Status) bool {
		return len(st.Sources) == 1 && st.Sources[0].Connected && st.Role == "leader"
	})
	if nicks := koeNicks(alice.Names("koe")); len(nicks) != 1 {
		t.Fatalf("koe clients in the channel after the take-over: %q", nicks)
	}
	// A, cut off, cannot reach the leader: its commands say so.
	code, body := a.call(t, http.MethodPost, "/api/live/pause", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "does not run the live chat and could not forward") {
		t.Fatalf("pause on the cut-off instance: %d %s", code, body)
	}
	if st := a.status(t); st.Role != "standby" || st.LastError == "" {
		t.Fatalf("status of the cut-off instance: %+v", st)
	}
	alice.Send("PRIVMSG #koe :anyone there?")
	b.waitStatus(t, "the message after the take-over answered", idleAfter(1))
	if turns := c.chatTurns(); !slices.Equal(turns, []string{chatTurn("alice", "hello koe"), chatTurn("alice", "anyone there?")}) {
		t.Fatalf("the LLM was asked %q", turns)
	}
	// Back, A stands by.
	c.waitLog("A", logNoRedis, 1)
	a.proxy.Mend()
	a.waitStatus(t, "A standing by behind B", func(st livechat.Status) bool { return st.Role == "standby" && st.Leader != "" && st.Spoken == 1 })
	c.check()
}

// TestLiveChatRedisRestart: redis-server restarted (without its data)
// under two instances: never two live chats at once, and afterwards one
// runs it and answers a message once.
func TestLiveChatRedisRestart(t *testing.T) {
	c := startLiveCluster(t)
	c.start("A", false)
	c.start("B", false)
	lead := c.leader()
	lead.waitStatus(t, "the leader's Twitch source connected", func(st livechat.Status) bool {
		return len(st.Sources) == 1 && st.Sources[0].Connected
	})
	alice := ircdtest.NewChatter(t, c.irc.Plain, "alice", "koe")
	alice.Send("PRIVMSG #koe :before the restart")
	lead.waitStatus(t, "the first message answered", idleAfter(1))

	leads := c.logged("A", logLeads) + c.logged("B", logLeads)
	c.redis.Stop()
	c.redis.Start()
	// Settled: each instance answers with the same leader's status, its
	// Twitch source connected.
	for _, n := range []*liveNode{c.nodes["A"], c.nodes["B"]} {
		n.waitStatus(t, "a settled leader", func(st livechat.Status) bool {
			return st.Leader != "" && (st.Role == "leader" || st.Role == "standby") &&
				len(st.Sources) == 1 && st.Sources[0].Connected
		})
	}
	newLead := c.leader()
	t.Logf("after the restart %s leads (it was %s; %d elections before, %d after)", newLead.name, lead.name,
		leads, c.logged("A", logLeads)+c.logged("B", logLeads))
	spoken := newLead.status(t).Spoken
	before := len(c.chatTurns())
	alice.Send("PRIVMSG #koe :after the restart")
	newLead.waitStatus(t, "the message after the restart answered", idleAfter(spoken+1))
	turns := c.chatTurns()
	if len(turns) != before+1 || turns[len(turns)-1] != chatTurn("alice", "after the restart") {
		t.Fatalf("the LLM was asked %q", turns)
	}
	if nicks := koeNicks(alice.Names("koe")); len(nicks) != 1 {
		t.Fatalf("koe clients in the channel: %q", nicks)
	}
	c.check()
	// Closed while the restarted redis-server still runs (its cleanup
	// comes first), so that the leader releases its lead.
	for _, n := range c.nodes {
		if err := n.koe.Close(); err != nil {
			t.Error(err)
		}
	}
}
