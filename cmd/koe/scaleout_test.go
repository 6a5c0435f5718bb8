package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/redis/go-redis/v9"

	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/pgtest"
	"koe/testkit/proctest"
	"koe/testkit/redistest"
)

// Three koe processes share one PostgreSQL schema and one redis-server,
// behind nginx configured by deploy/nginx.conf (its upstreams and listen
// address substituted): a conversation whose turns land on every instance
// keeps one history; a stop sent to one instance stops the turn another
// runs; Redis restarted mid-run leaves turns and stops working; an
// instance killed with SIGKILL mid-turn loses nothing stored and its lease
// expires, so the next turn in that history, through nginx, is answered.
func TestScaleOutBehindNginx(t *testing.T) {
	if testing.Short() {
		t.Skip("starts koe, nginx and redis-server in child processes")
	}
	dsn := pgtest.Schema(t)
	rds := redistest.Start(t)
	// A message starting with "slow" gets an endless answer, to be
	// stopped; any other is echoed at once.
	echo := fakellm.Echo(time.Millisecond)
	llm, err := fakellm.Start("127.0.0.1:0", func(req fakellm.Request) fakellm.Reply {
		if strings.HasPrefix(req.UserWords(), "slow") {
			return fakellm.Reply{Tokens: fakellm.Words("and so on "), Interval: 20 * time.Millisecond, Endless: true}
		}
		return echo(req)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)

	koes := startSharedInstances(t, 3, dsn, rds.URL(), llm.URL(), "  lease: 2s\n  wait: 60s\n")
	lb := startNginx(t, []string{koes[0].addr, koes[1].addr, koes[2].addr})

	// want is every message the clients saw stored, in order.
	var want []string
	said := func(text string) {
		want = append(want, "human: "+text, "ai: You said: "+text+".")
	}

	// An overlay watching the character through nginx hears every turn
	// of step 1 (chat API turns too), whichever instance it and they are
	// on.
	// Its instance tells the others through Redis; the test hears it too.
	follows := followNews(t, rds)
	overlay := watchThrough(t, lb, "koe_default")
	follows("+\nf\nkoe_default")

	// 1. Six turns through nginx, over the chat API and the WebSocket in
	// turn: each instance serves some, and all go to one history.
	var before []float64
	for _, k := range koes {
		before = append(before, turnsStarted(t, k.addr))
	}
	uid := ""
	for n := 1; n <= 6; n++ {
		text := fmt.Sprintf("turn %d", n)
		if n%2 == 1 {
			got := chatTurn(t, lb, uid, text)
			if uid != "" && got != uid {
				t.Fatalf("turn %d went to history %q, want %q", n, got, uid)
			}
			uid = got
		} else {
			turn(t, lb, uid, fmt.Sprintf("turn %d", n-1), text)
		}
		said(text)
	}
	for i, k := range koes {
		if d := turnsStarted(t, k.addr) - before[i]; d < 1 {
			t.Errorf("koe %d served no turn of six through nginx", i+1)
		} else {
			t.Logf("koe %d served %v of the six turns", i+1, d)
		}
	}
	for i, k := range koes {
		if got := historyOf(t, k.addr, uid); !slices.Equal(got, want) {
			t.Fatalf("the history read from koe %d:\n%q\nwant\n%q", i+1, got, want)
		}
	}
	var replies []string
	for n := 1; n <= 6; n++ {
		replies = append(replies, fmt.Sprintf("You said: turn %d.", n))
	}
	if heard := overlay.heard(6); !slices.Equal(heard, replies) {
		t.Fatalf("the overlay watching through nginx heard %q", heard)
	}
	overlay.Close()

	// 2. A stop sent to koe 1 stops the turn koe 2 streams.
	took := stopAcross(t, koes[1].addr, koes[0].addr, "slow one")
	t.Logf("stop sent to koe 1, turn on koe 2 stopped and stored: %s", took.Round(time.Microsecond))
	// And through nginx, which passes consecutive requests to different
	// instances.
	var lbStops []time.Duration
	for n := range 5 {
		lbStops = append(lbStops, stopAcross(t, lb, lb, fmt.Sprintf("slow %d", n)))
	}
	slices.Sort(lbStops)
	t.Logf("stops through nginx: median %s, max %s over %d", lbStops[len(lbStops)/2].Round(time.Microsecond),
		lbStops[len(lbStops)-1].Round(time.Microsecond), len(lbStops))

	// 3. Redis restarted while koe 2 runs a turn: turns go on, and the stop
	// sent to koe 1 reaches koe 2.
	s := openChat(t, koes[1].addr, protocol.ChatRequest{Message: "slow during the restart"})
	slowUID := s.untilToken()
	rds.Stop()
	rds.Start()
	restarted := time.Now()
	// A Redis without persistence lost koe 2's lease; a stop sent at once
	// waits until koe 2 has set it again, then stops the turn.
	stop(t, koes[0].addr, slowUID)
	t.Logf("stop sent right after the Redis restart answered after %s", time.Since(restarted).Round(time.Millisecond))
	if !s.interrupted() {
		t.Fatal("the turn running across the Redis restart did not end stopped")
	}
	text := "after the Redis restart"
	if got := chatTurn(t, lb, uid, text); got != uid {
		t.Fatalf("turn after the Redis restart went to %q", got)
	}
	said(text)
	took = stopAcross(t, koes[2].addr, koes[0].addr, "slow after the restart")
	t.Logf("stop across instances after the Redis restart: %s", took.Round(time.Microsecond))

	// 4. koe 3 killed with SIGKILL mid-turn in the conversation's history:
	// its lease expires, and the next turn through nginx is answered in
	// the history with everything stored before.
	s = openChat(t, koes[2].addr, protocol.ChatRequest{Message: "slow then killed", HistoryUID: uid})
	s.untilToken()
	if err := koes[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-koes[2].exited
	start := time.Now()
	text = "after the kill"
	if got := chatTurn(t, lb, uid, text); got != uid {
		t.Fatalf("turn after the kill went to %q", got)
	}
	t.Logf("first turn in the killed instance's history answered %s after the kill", time.Since(start).Round(time.Millisecond))
	for i, k := range koes[:2] {
		got := historyOf(t, k.addr, uid)
		// The killed turn may have stored its question; nothing else
		// of it, and everything before it.
		if n := len(got); n >= 3 && got[n-3] == "human: slow then killed" {
			got = append(got[:n-3], got[n-2:]...)
			if i == 0 {
				t.Log("the killed turn's question was stored, its answer was not")
			}
		}
		if !slices.Equal(got, append(want, "human: after the kill", "ai: You said: after the kill.")) {
			t.Fatalf("the history read from koe %d after the kill:\n%q", i+1, got)
		}
	}
}

// stopAcross opens a chat stream with text (a slow answer) at addr, asks
// stopAt to stop it once it streams, and returns how long the stop request
// took; the stream must end with the answer marked interrupted.
func stopAcross(t *testing.T, addr, stopAt, text string) time.Duration {
	t.Helper()
	s := openChat(t, addr, protocol.ChatRequest{Message: text})
	uid := s.untilToken()
	start := time.Now()
	stop(t, stopAt, uid)
	took := time.Since(start)
	if !s.interrupted() {
		t.Fatalf("the turn %q did not end stopped", text)
	}
	return took
}

// stop asks koe (or nginx) at addr to stop the turn in history uid.
func stop(t *testing.T, addr, uid string) {
	t.Helper()
	resp, err := http.Post(httpURL(addr)+"/api/chat/"+uid+"/stop", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res protocol.StopResult
	_ = json.NewDecoder(resp.Body).Decode(&res)
	if resp.StatusCode != http.StatusOK || !res.Stopped || res.HistoryUID != uid {
		t.Fatalf("stop of %s at %s: %s %+v", uid, addr, resp.Status, res)
	}
}

// chatStream is a POST /api/chat/stream being read.
type chatStream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

func openChat(t *testing.T, addr string, req protocol.ChatRequest) *chatStream {
	t.Helper()
	body, _ := json.Marshal(req)
	resp, err := http.Post(httpURL(addr)+"/api/chat/stream", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("chat stream at %s: %s %s", addr, resp.Status, msg)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	return &chatStream{t: t, resp: resp, sc: sc}
}

// next returns the next event; the stream must have one.
func (s *chatStream) next() (string, json.RawMessage) {
	s.t.Helper()
	for s.sc.Scan() {
		line, ok := strings.CutPrefix(s.sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			s.t.Fatalf("chat event %q: %v", line, err)
		}
		if ev.Type == "error" {
			s.t.Fatalf("chat stream error: %s", ev.Content)
		}
		return ev.Type, ev.Content
	}
	s.t.Fatalf("chat stream ended without its end event: %v", s.sc.Err())
	return "", nil
}

// message decodes a message event's content.
func (s *chatStream) message(content json.RawMessage) protocol.ChatMessage {
	s.t.Helper()
	var m protocol.ChatMessage
	if err := json.Unmarshal(content, &m); err != nil {
		s.t.Fatalf("chat message %s: %v", content, err)
	}
	return m
}

// untilToken reads the echoed question, returns its history, and reads
// until the answer streams.
func (s *chatStream) untilToken() string {
	s.t.Helper()
	typ, content := s.next()
	if typ != protocol.TypeMessage {
		s.t.Fatalf("first chat event %s %s, want the echoed message", typ, content)
	}
	uid := s.message(content).AdditionalKwargs.HistoryUID
	for typ != protocol.EventToken {
		typ, _ = s.next()
	}
	return uid
}

// interrupted reads to the end event and says whether the answer was
// marked interrupted.
func (s *chatStream) interrupted() bool {
	s.t.Helper()
	var last protocol.ChatMessage
	for {
		typ, content := s.next()
		switch typ {
		case protocol.TypeMessage:
			last = s.message(content)
		case protocol.EventEnd:
			return last.Type == "ai" && last.AdditionalKwargs.Interrupted
		}
	}
}

// chatTurn runs one turn over the chat API at addr in history uid ("": a
// new one) and returns the history's uid; the answer must echo text.
func chatTurn(t *testing.T, addr, uid, text string) string {
	t.Helper()
	s := openChat(t, addr, protocol.ChatRequest{Message: text, HistoryUID: uid})
	defer s.resp.Body.Close()
	var got string
	var answer protocol.ChatMessage
	for {
		typ, content := s.next()
		if typ == protocol.EventEnd {
			break
		}
		if typ != protocol.TypeMessage {
			continue
		}
		m := s.message(content)
		if m.Type == "human" {
			got = m.AdditionalKwargs.HistoryUID
		} else {
			answer = m
		}
	}
	if want := "You said: " + text + "."; answer.Type != "ai" || answer.Content != want || answer.AdditionalKwargs.Interrupted {
		t.Fatalf("answer to %q: %+v", text, answer)
	}
	return got
}

// historyOf reads history uid from koe at addr as "type: content" lines.
func historyOf(t *testing.T, addr, uid string) []string {
	t.Helper()
	resp, err := http.Get(httpURL(addr) + "/api/histories/koe_default/" + uid + "?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h protocol.ChatHistory
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("history %s at %s: %s %v", uid, addr, resp.Status, err)
	}
	if h.More {
		t.Fatalf("history %s has more than a page", uid)
	}
	var out []string
	for _, m := range h.Messages {
		out = append(out, m.Type+": "+m.Content)
	}
	return out
}

var turnsLine = regexp.MustCompile(`(?m)^koe_turns_started_total\{koe_instance="[^"]*"\} ([0-9.e+]+)$`)

// turnsStarted reads koe_turns_started_total from koe at addr.
func turnsStarted(t *testing.T, addr string) float64 {
	t.Helper()
	resp, err := http.Get(httpURL(addr) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := turnsLine.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("/metrics at %s: %s, no koe_turns_started_total", addr, resp.Status)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// startNginx runs Debian's nginx in the foreground with deploy/nginx.conf,
// the whole file, its three upstream servers replaced by koes, its listen
// addresses by free loopback ports, its certificate by one made for the
// test (see nginxCert), and the paths of its pid file, logs and temporary
// files by ones in a temporary directory. It returns the TLS address once
// nginx accepts connections there: speak to it with httpURL and wsURL,
// which know it. Its access log (in the format deploy/nginx.conf gives) is
// at accessLogPath(that directory).
func startNginx(t *testing.T, koes []string) string {
	addr, _ := startNginxIn(t, koes)
	return addr
}

// accessLogPath is where startNginxIn's nginx writes its access log.
func accessLogPath(dir string) string { return filepath.Join(dir, "access.log") }

// startNginxIn is startNginx, also returning nginx's directory.
func startNginxIn(t *testing.T, koes []string) (addr, dir string) {
	t.Helper()
	n := runNginx(t, koes)
	return n.tls, n.dir
}

// nginxRun is nginx started by runNginx: its TLS and plain HTTP
// addresses and its directory.
type nginxRun struct {
	tls, plain, dir string
}

// runNginx starts nginx as startNginx says.
func runNginx(t *testing.T, koes []string) nginxRun {
	t.Helper()
	bin := "/usr/sbin/nginx"
	if _, err := os.Stat(bin); err != nil {
		bin = proctest.LookPath(t, "nginx", "nginx")
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(shipped)
	var n nginxRun
	// Both ports are picked before either is let go: two different ones.
	var picked []net.Listener
	for _, a := range []*string{&n.tls, &n.plain} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		*a = l.Addr().String()
		picked = append(picked, l)
	}
	for _, l := range picked {
		l.Close()
	}
	n.dir = t.TempDir()
	dir := n.dir
	certFile, keyFile := writeNginxCert(t, dir)
	// As root, nginx's workers would switch to an unprivileged user that
	// cannot use this directory: they stay root.
	user := ""
	if os.Geteuid() == 0 {
		user = "user root root;"
	}
	subst := map[string]string{
		"user www-data;":                              user,
		"pid /run/nginx.pid;":                         "pid " + filepath.Join(dir, "nginx.pid") + ";",
		"error_log /var/log/nginx/error.log;":         "error_log stderr notice;",
		"listen 443 ssl;":                             "listen " + n.tls + " ssl;",
		"listen 80;":                                  "listen " + n.plain + ";",
		"ssl_certificate     /etc/nginx/tls/koe.crt;": "ssl_certificate " + certFile + ";",
		"ssl_certificate_key /etc/nginx/tls/koe.key;": "ssl_certificate_key " + keyFile + ";",
		"access_log /var/log/nginx/access.log koe;":   "access_log " + accessLogPath(dir) + " koe;",
		// Debian's nginx keeps request bodies and buffered responses
		// under /var/lib/nginx; the test's go in its directory.
		"http {\n": fmt.Sprintf("http {\n    client_body_temp_path %[1]s/body;\n    proxy_temp_path %[1]s/proxy;\n"+
			"    fastcgi_temp_path %[1]s/fastcgi;\n    uwsgi_temp_path %[1]s/uwsgi;\n    scgi_temp_path %[1]s/scgi;\n", dir),
	}
	for i, k := range koes {
		subst[fmt.Sprintf("server koe%d:12393 ", i+1)] = "server " + k + " "
	}
	for old, repl := range subst {
		if strings.Count(conf, old) != 1 {
			t.Fatalf("deploy/nginx.conf should hold %q once", old)
		}
		conf = strings.Replace(conf, old, repl, 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr", "-g", "daemon off;")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, so that its workers go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("nginx's log:\n%s", out.String())
		}
	})
	// nginx says nothing when it is ready: it is once it accepts.
	addr := n.tls
	testkit.Eventually(t, "nginx accepts on "+addr, func() bool {
		select {
		case err := <-exited:
			t.Fatalf("nginx ended: %v\n%s", err, out.String())
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	nginxTLS.Store(n.tls, true)
	// Once this nginx is gone its port may go to a koe of a later test,
	// which speaks plain HTTP.
	t.Cleanup(func() { nginxTLS.Delete(n.tls) })
	return n
}

// followNews subscribes to the channel where koe instances say what
// their watchers follow; the function it returns waits for news ending
// with suffix.
func followNews(t *testing.T, rds *redistest.Server) func(suffix string) {
	t.Helper()
	opts, err := redis.ParseURL(rds.URL())
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	t.Cleanup(cancel)
	sub := client.Subscribe(ctx, "koe:watch:follow")
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	return func(suffix string) {
		t.Helper()
		for {
			m, err := sub.ReceiveMessage(ctx)
			if err != nil {
				t.Fatalf("waiting for %q on koe:watch:follow: %v", suffix, err)
			}
			if strings.HasSuffix(m.Payload, suffix) {
				return
			}
		}
	}
}

// watcher is a /client-ws?watch_conf= connection.
type watcher struct {
	t *testing.T
	*websocket.Conn
}

// watchThrough connects a watcher of character conf at addr and reads its
// greeting.
func watchThrough(t *testing.T, addr, conf string) *watcher {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(wsURL(addr)+"/client-ws?watch_conf="+conf, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	w := &watcher{t: t, Conn: ws}
	w.until(func(m map[string]any) bool { return m["type"] == "set-model-and-conf" })
	return w
}

// until reads frames until stop holds for one, and returns them.
func (w *watcher) until(stop func(map[string]any) bool) []map[string]any {
	w.t.Helper()
	var got []map[string]any
	for {
		_ = w.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a hang guard
		_, data, err := w.ReadMessage()
		if err != nil {
			w.t.Fatalf("watcher: %v after %d frames", err, len(got))
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			w.t.Fatal(err)
		}
		got = append(got, m)
		if stop(m) {
			return got
		}
	}
}

// heard reads n turns and returns the text each displayed, joined.
func (w *watcher) heard(n int) []string {
	w.t.Helper()
	var out []string
	for range n {
		var text strings.Builder
		for _, m := range w.until(func(m map[string]any) bool {
			return m["type"] == "control" && m["text"] == "conversation-chain-end"
		}) {
			if d, ok := m["display_text"].(map[string]any); ok && m["type"] == "audio" {
				s, _ := d["text"].(string)
				text.WriteString(s)
			}
		}
		out = append(out, strings.TrimSpace(text.String()))
	}
	return out
}
