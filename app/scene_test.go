package app_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"koe/config"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/ircdtest"
)

// TestSceneRefusals: the scenes' routes refuse a request without the
// token, from a foreign page or with a body over the limit before reading
// its body, and a request that cannot work with the key that bounds it.
func TestSceneRefusals(t *testing.T) {
	k := startSceneKoe(t, func(c *config.Config) {
		c.Scenes.MaxCharacters = 2
		c.Scenes.MaxRounds = 4
		c.Scenes.MaxDuration = time.Minute
		c.Scenes.MaxRunning = 1
	})
	// Only the header block is sent, announcing a body that never comes:
	// the answer comes at once all the same.
	for _, c := range []struct {
		what, headers string
		status        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a foreign page", "Authorization: Bearer " + sceneToken + "\r\nOrigin: http://evil.example\r\n", http.StatusForbidden},
		{"a body over server.max_message_bytes", "Authorization: Bearer " + sceneToken + "\r\n", http.StatusRequestEntityTooLarge},
	} {
		length := 100
		if c.status == http.StatusRequestEntityTooLarge {
			length = k.cfg.Server.MaxMessageBytes + 1
		}
		if got := sceneHeadOnly(t, k.addr, c.headers, length); got != c.status {
			t.Errorf("%s: status %d, want %d before the body", c.what, got, c.status)
		}
	}

	two := []string{"koe_default", "mio"}
	for _, c := range []struct {
		what   string
		req    protocol.SceneRequest
		status int
		says   string
	}{
		{"one character", protocol.SceneRequest{Characters: []string{"mio"}, Topic: "cats"}, 400, "two characters or more"},
		{"too many", protocol.SceneRequest{Characters: []string{"koe_default", "mio", "default"}, Topic: "cats"}, 400, "scenes.max_characters"},
		{"unknown character", protocol.SceneRequest{Characters: []string{"mio", "nobody"}, Topic: "cats"}, 404, `no character has conf_uid "nobody"`},
		{"max_rounds", protocol.SceneRequest{Characters: two, Topic: "cats", MaxRounds: 5}, 400, "at most 4 (scenes.max_rounds)"},
		{"duration", protocol.SceneRequest{Characters: two, Topic: "cats", Duration: "2m"}, 400, "scenes.max_duration"},
		{"no topic", protocol.SceneRequest{Characters: two}, 400, `needs a "topic"`},
	} {
		a := k.api(http.MethodPost, "/api/scenes", c.req)
		if a.status != c.status || !strings.Contains(a.errorText(), c.says) {
			t.Errorf("%s: %d %s, want %d saying %q", c.what, a.status, a.body, c.status, c.says)
		}
	}
	if a := k.api(http.MethodGet, "/api/scenes/nope", nil); a.status != 404 {
		t.Errorf("an unknown scene: %d %s", a.status, a.body)
	}
	// One scene at a time here: the second waits for the first to end.
	hold := k.gateOn("Today's topic")
	first := k.startScene(protocol.SceneRequest{Characters: two, Topic: "cats", MaxRounds: 1})
	if a := k.api(http.MethodPost, "/api/scenes", protocol.SceneRequest{Characters: two, Topic: "dogs"}); a.status != 409 || !strings.Contains(a.errorText(), "scenes.max_running") {
		t.Errorf("a second scene: %d %s, want 409 naming scenes.max_running", a.status, a.body)
	}
	hold.release()
	k.awaitScene("the first scene ends", first.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	k.startScene(protocol.SceneRequest{Characters: two, Topic: "dogs", MaxRounds: 1})
}

// sceneHeadOnly sends a POST /api/scenes header block announcing length
// bytes of body, sends none, and returns the status koe answers.
func sceneHeadOnly(t *testing.T, addr, headers string, length int) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(guard))
	fmt.Fprintf(c, "POST /api/scenes HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", addr, headers, length)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestSceneTwoCharacters: two characters say their rounds in order, each
// given the other's lines by name, each line an ordinary turn its
// watchers see, kept in each character's history and in the scene's
// record; the scene ends by itself after max_rounds.
func TestSceneTwoCharacters(t *testing.T) {
	k := startSceneKoe(t, nil)
	mio := k.watch("watch_conf=mio")
	in := k.startScene(protocol.SceneRequest{Characters: []string{"default", "mio"}, Topic: "cats or dogs", MaxRounds: 2})
	if in.Characters[0].ConfUID != "koe_default" || in.Characters[1].Name != "Mio" || in.Characters[1].ClientUID == "" {
		t.Fatalf("the scene's characters: %+v", in.Characters)
	}
	end := k.awaitScene("the scene ends", in.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	want := []string{"Streamer: cats or dogs", "Koe: Koe line 1.", "Mio: Mio line 1.", "Koe: Koe line 2.", "Mio: Mio line 2."}
	if got := sceneTexts(end); !slices.Equal(got, want) || end.Rounds != 2 || end.EndReason != protocol.SceneEndRounds {
		t.Fatalf("scene: %q, %d rounds, ended %q; want %q after 2 rounds", got, end.Rounds, end.EndReason, want)
	}
	// Each is given what was said since its last line, by speaker.
	reqs := k.lineRequests()
	if len(reqs) != 4 || !strings.Contains(reqs[0], "Today's topic: cats or dogs") ||
		!strings.Contains(reqs[1], "Koe: Koe line 1.") || !strings.Contains(reqs[2], "Mio: Mio line 1.") ||
		strings.Contains(reqs[2], "Koe line 1") {
		t.Errorf("the lines' requests: %q", reqs)
	}
	// Mio's watcher saw Mio's two turns, whole.
	for n := 1; n <= 2; n++ {
		frames := mio.until("control", "conversation-chain-end")
		var said []string
		for _, f := range frames {
			if f.Type == "audio" && f.DisplayText != nil {
				said = append(said, f.DisplayText.Text)
			}
		}
		if strings.Join(said, " ") != fmt.Sprintf("Mio line %d.", n) {
			t.Errorf("Mio's watcher saw turn %d say %q", n, said)
		}
	}
	// Each keeps the scene in its history: its lines as its own.
	var koeSaid []string
	for _, r := range k.history("koe_default", in.Characters[0].HistoryUID) {
		if r.Role == "ai" {
			koeSaid = append(koeSaid, r.Content)
		}
	}
	if !slices.Equal(koeSaid, []string{"Koe line 1.", "Koe line 2."}) {
		t.Errorf("Koe's history holds %q", koeSaid)
	}
	if end.RecordUID == "" {
		t.Errorf("the scene has no record")
	}
}

// TestScenePauseStop: a pause holds the scene after the line being said,
// resume goes on with the next speaker; a stop mid-line ends the scene
// and keeps the line as far as it was heard.
func TestScenePauseStop(t *testing.T) {
	k := startSceneKoe(t, func(c *config.Config) { c.Server.Metrics = true })
	hold := k.gateOn("Today's topic")
	in := k.startScene(protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "tea", MaxRounds: 3})
	testkit.Eventually(t, "Koe's first line is asked", func() bool { return len(k.lineRequests()) == 1 })
	// Each character of the scene holds a session, counted as any other.
	if m := k.api(http.MethodGet, "/metrics", nil); !regexp.MustCompile(`(?m)^koe_sessions_open\{[^}]*kind="scene"[^}]*\} 2$`).Match(m.body) {
		t.Errorf("/metrics does not count the scene's two sessions:\n%s", m.body)
	}
	if got := k.command(in.ID, "pause"); got.State != protocol.SceneRunning || got.Speaking != "koe_default" {
		t.Errorf("paused mid-line: %+v, want the line going on", got)
	}
	hold.release()
	k.awaitScene("the scene pauses after the line", in.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.ScenePaused })
	if n := len(k.lineRequests()); n != 1 {
		t.Fatalf("%d lines asked while paused, want 1", n)
	}
	// Mio's line is long: once its first sentence has been on air, stop.
	k.longNext("Mio")
	mioW := k.watch("watch_conf=mio")
	k.command(in.ID, "resume")
	for {
		frames := mioW.until("audio", "")
		if f := frames[len(frames)-1]; f.DisplayText != nil && strings.HasPrefix(f.DisplayText.Text, "Mio starts line 1.") {
			break
		}
	}
	got := k.command(in.ID, "stop")
	if got.State != protocol.SceneEnded || got.EndReason != protocol.SceneEndStopped {
		t.Fatalf("stopped: %+v", got)
	}
	last := got.Lines[len(got.Lines)-1]
	if !last.Interrupted || last.ConfUID != "mio" || !strings.HasPrefix(last.Text, "Mio starts line 1.") || strings.Count(last.Text, "on and on") > 150 {
		t.Errorf("the stopped line is kept as %+v, want Mio's as heard", last)
	}
	mioW.until("control", "interrupt")
	var stored []protocol.HistoryRecord
	for _, r := range k.history("mio", in.Characters[1].HistoryUID) {
		if r.Role == "ai" {
			stored = append(stored, r)
		}
	}
	if len(stored) != 1 || !stored[0].Interrupted || stored[0].Content != last.Text {
		t.Errorf("Mio's history keeps %+v, want the line as heard (%q), interrupted", stored, last.Text)
	}
}

// TestSceneViewersLine: while a scene with the live chat's character
// runs, a viewer's message enters the scene as a line the next speaker
// is given, instead of a turn of the live session.
func TestSceneViewersLine(t *testing.T) {
	testkit.External(t, "ngircd")
	irc := ircdtest.Start(t, "")
	k := startSceneKoe(t, func(c *config.Config) {
		c.LiveChat.Enabled = true
		c.LiveChat.Character = "mio"
		c.LiveChat.Twitch.Channel = "koe"
		c.LiveChat.Twitch.Server = fmt.Sprintf("127.0.0.1:%d", irc.TLS)
		c.LiveChat.Twitch.CAFile = irc.CertFile
	})
	testkit.Eventually(t, "the live chat reads the channel", func() bool {
		a := k.api(http.MethodGet, "/api/live", nil)
		return a.status == 200 && strings.Contains(string(a.body), `"connected":true`)
	})
	hold := k.gateOn("Today's topic")
	in := k.startScene(protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "tea", MaxRounds: 2})
	if !in.LiveChat {
		t.Fatalf("the scene with the live chat's character does not take the chat: %+v", in)
	}
	testkit.Eventually(t, "Koe's first line is asked", func() bool { return len(k.lineRequests()) == 1 })
	alice := ircdtest.NewChatter(t, irc.Plain, "alice", "koe")
	alice.Send("PRIVMSG #koe :do you like green tea?")
	testkit.Eventually(t, "the live chat hands the message over", func() bool {
		a := k.api(http.MethodGet, "/api/live", nil)
		return strings.Contains(string(a.body), `"running":true`)
	})
	hold.release()
	end := k.awaitScene("the scene ends", in.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	reqs := k.lineRequests()
	if len(reqs) != 4 || !strings.Contains(reqs[1], `viewers alice: <live_chat>`) || !strings.Contains(reqs[1], `viewer alice says: "do you like green tea?"`) {
		t.Fatalf("the lines' requests %q, want Mio's first given alice's message", reqs)
	}
	texts := sceneTexts(end)
	if len(texts) != 6 || !strings.HasPrefix(texts[2], "viewers alice: <live_chat>") {
		t.Errorf("scene lines %q, want the viewers' line before Mio's", texts)
	}
	// No turn of the live session answered it.
	for _, r := range k.history("mio", k.cfg.LiveChat.History) {
		t.Errorf("the live session's history holds %+v", r)
	}
}

// TestSceneLineFails: a line the LLM server refuses ends the scene,
// saying why in the streamer's terms.
func TestSceneLineFails(t *testing.T) {
	k := startSceneKoe(t, nil)
	k.mu.Lock()
	k.fail["Mio"] = true
	k.mu.Unlock()
	in := k.startScene(protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "tea", MaxRounds: 2})
	end := k.awaitScene("the scene ends", in.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	if end.EndReason != protocol.SceneEndFailed || !strings.Contains(end.Error, "503") || len(end.Lines) != 2 {
		t.Errorf("scene %+v, want it failed on Mio's line, saying the server answered 503", end)
	}
}

// TestSceneDrain: koe's drain before a restart lets the scene's line
// being said end, begins no other line, and refuses a new scene; Close
// ends the scene as a shutdown, its lines kept.
func TestSceneDrain(t *testing.T) {
	k := startSceneKoe(t, nil)
	hold := k.gateOn("Today's topic")
	in := k.startScene(protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "tea", MaxRounds: 2})
	testkit.Eventually(t, "Koe's first line is asked", func() bool { return len(k.lineRequests()) == 1 })
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		k.koe.Drain(context.Background())
	}()
	testkit.Eventually(t, "a new scene is refused while koe drains", func() bool {
		a := k.api(http.MethodPost, "/api/scenes", protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "more"})
		return a.status == http.StatusServiceUnavailable && strings.Contains(string(a.body), `"draining":true`)
	})
	hold.release()
	<-drained
	got := k.scene(in.ID)
	if n := len(k.lineRequests()); n != 1 || len(got.Lines) != 2 || got.Lines[1].Text != "Koe line 1." || got.Lines[1].Interrupted {
		t.Fatalf("after the drain: %d lines asked, scene %q; want Koe's first line whole and no other", n, sceneTexts(got))
	}
	if err := k.koe.Close(); err != nil {
		t.Fatal(err)
	}
}
