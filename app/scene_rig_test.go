package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/app"
	"koe/config"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// A koe with two characters for the scenes' tests: the configuration's
// own (Koe) and Mio, from a character file. The fake LLM answers each
// character's n-th line with "<Name> line <n>."; a line whose request
// holds a gate's word waits at its second chunk until the gate opens.

// sceneToken is server.auth_token of the scenes' koe.
const sceneToken = "scene-test-token"

type sceneKoe struct {
	t    testing.TB
	llm  *fakellm.Server
	koe  *app.Main
	addr string
	cfg  config.Config

	mu    sync.Mutex
	count map[string]int // lines asked of each character
	gates map[string]*gate
	long  map[string]bool // a character whose next line is long
	fail  map[string]bool // a character whose lines the LLM server refuses
	empty map[string]bool // a character whose model thinks and says nothing
}

// sceneSpeakers tells which character a request is for: the persona's
// mark is in the request wherever the persona goes.
var sceneSpeakers = []struct{ mark, name string }{{"PERSONA-KOE", "Koe"}, {"PERSONA-MIO", "Mio"}}

func startSceneKoe(t testing.TB, tune func(*config.Config)) *sceneKoe {
	t.Helper()
	k := &sceneKoe{t: t, count: map[string]int{}, gates: map[string]*gate{}, long: map[string]bool{}, fail: map[string]bool{}, empty: map[string]bool{}}
	k.llm = koetest.StartLLM(t, k.respond)
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), k.llm.URL()), k.llm)
	cfg.Server.AuthToken = sceneToken
	cfg.Character.Persona = "You are Koe. PERSONA-KOE"
	if err := os.MkdirAll(cfg.CharactersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	mio := "conf_name: mio\nconf_uid: mio\ncharacter_name: Mio\npersona_prompt: You are Mio. PERSONA-MIO\n"
	if err := os.WriteFile(filepath.Join(cfg.CharactersDir, "mio.yaml"), []byte(mio), 0o644); err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(&cfg)
	}
	k.cfg = cfg
	k.koe = koetest.StartKoe(t, cfg)
	k.addr = k.koe.Addr()
	return k
}

// respond is the fake LLM: summaries get a summary, lines their text.
func (k *sceneKoe) respond(r fakellm.Request) fakellm.Reply {
	words := r.UserWords()
	if strings.HasPrefix(words, "[Turn ") {
		return fakellm.Reply{Tokens: fakellm.Words("A summary.")}
	}
	var all strings.Builder
	for _, m := range r.Messages {
		all.WriteString(m.Content)
		all.WriteByte('\n')
	}
	name := "Nobody"
	for _, s := range sceneSpeakers {
		if strings.Contains(all.String(), s.mark) {
			name = s.name
		}
	}
	k.mu.Lock()
	k.count[name]++
	n := k.count[name]
	long := k.long[name]
	k.long[name] = false
	fail := k.fail[name]
	empty := k.empty[name]
	var g *gate
	for word, gg := range k.gates {
		if strings.Contains(words, word) {
			g = gg
		}
	}
	k.mu.Unlock()
	if fail {
		return fakellm.Reply{Status: http.StatusServiceUnavailable, ErrorMessage: "the model is overloaded"}
	}
	if empty {
		// It thinks, and says nothing.
		return fakellm.Reply{Tokens: []string{" ", "\n"}}
	}
	text := fmt.Sprintf("%s line %d.", name, n)
	if long {
		text = fmt.Sprintf("%s starts line %d. ", name, n) + strings.Repeat("And it goes on and on. ", 200)
	}
	reply := fakellm.Reply{Tokens: fakellm.Words(text)}
	if g != nil {
		reply.BeforeChunk = func(i int) {
			if i == 2 {
				<-g.open
			}
		}
	}
	return reply
}

// gateOn makes lines whose request holds word wait until the returned
// gate opens (at cleanup at the latest).
func (k *sceneKoe) gateOn(word string) *gate {
	g := &gate{open: make(chan struct{})}
	k.mu.Lock()
	k.gates[word] = g
	k.mu.Unlock()
	k.t.Cleanup(g.release)
	return g
}

// longNext makes character name's next line long.
func (k *sceneKoe) longNext(name string) {
	k.mu.Lock()
	k.long[name] = true
	k.mu.Unlock()
}

// lineRequests are the user words of the requests for lines, in order.
func (k *sceneKoe) lineRequests() []string {
	var out []string
	for _, r := range k.llm.Requests() {
		if w := r.UserWords(); !strings.HasPrefix(w, "[Turn ") {
			out = append(out, w)
		}
	}
	return out
}

// sceneAnswer is an HTTP answer.
type sceneAnswer struct {
	status int
	body   []byte
}

func (a sceneAnswer) errorText() string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error
}

// api calls koe's API with the token.
func (k *sceneKoe) api(method, path string, body any) sceneAnswer {
	k.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			k.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, "http://"+k.addr+path, rd)
	if err != nil {
		k.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sceneToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return sceneAnswer{resp.StatusCode, b.Bytes()}
}

// startScene starts a scene and returns it.
func (k *sceneKoe) startScene(req protocol.SceneRequest) protocol.SceneInfo {
	k.t.Helper()
	a := k.api(http.MethodPost, "/api/scenes", req)
	if a.status != http.StatusCreated {
		k.t.Fatalf("start a scene: %d %s", a.status, a.body)
	}
	var in protocol.SceneInfo
	if err := json.Unmarshal(a.body, &in); err != nil {
		k.t.Fatal(err)
	}
	return in
}

// command posts a scene's command and returns the scene after it.
func (k *sceneKoe) command(id, cmd string) protocol.SceneInfo {
	k.t.Helper()
	a := k.api(http.MethodPost, "/api/scenes/"+id+"/"+cmd, nil)
	if a.status != http.StatusOK {
		k.t.Fatalf("%s scene %s: %d %s", cmd, id, a.status, a.body)
	}
	var in protocol.SceneInfo
	if cmd == "skip" {
		var body struct {
			Scene protocol.SceneInfo `json:"scene"`
		}
		_ = json.Unmarshal(a.body, &body)
		return body.Scene
	}
	if err := json.Unmarshal(a.body, &in); err != nil {
		k.t.Fatal(err)
	}
	return in
}

func (k *sceneKoe) scene(id string) protocol.SceneInfo {
	k.t.Helper()
	a := k.api(http.MethodGet, "/api/scenes/"+id, nil)
	if a.status != http.StatusOK {
		k.t.Fatalf("get scene %s: %d %s", id, a.status, a.body)
	}
	var in protocol.SceneInfo
	if err := json.Unmarshal(a.body, &in); err != nil {
		k.t.Fatal(err)
	}
	return in
}

// awaitScene asks for the scene until ok holds.
func (k *sceneKoe) awaitScene(what, id string, ok func(protocol.SceneInfo) bool) protocol.SceneInfo {
	k.t.Helper()
	return testkit.Await(k.t, what, func() (protocol.SceneInfo, bool) {
		in := k.scene(id)
		return in, ok(in)
	})
}

// history is a character's stored history.
func (k *sceneKoe) history(conf, uid string) []protocol.HistoryRecord {
	k.t.Helper()
	a := k.api(http.MethodGet, "/api/histories/"+conf+"/"+uid+"/messages?limit=100", nil)
	if a.status != http.StatusOK {
		k.t.Fatalf("history %s/%s: %d %s", conf, uid, a.status, a.body)
	}
	var page protocol.HistoryPage
	if err := json.Unmarshal(a.body, &page); err != nil {
		k.t.Fatal(err)
	}
	return page.Messages
}

// sceneWatcher is a watcher of one session or character (OLV frames).
type sceneWatcher struct {
	t  testing.TB
	ws *websocket.Conn
}

func (k *sceneKoe) watch(query string) *sceneWatcher {
	k.t.Helper()
	h := http.Header{"Authorization": {"Bearer " + sceneToken}}
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+k.addr+"/client-ws?"+query, h)
	if err != nil {
		k.t.Fatalf("watch %s: %v", query, err)
	}
	_ = resp.Body.Close()
	k.t.Cleanup(func() { _ = ws.Close() })
	// Greeted once registered: it sees every frame from here on.
	readFramesUntil(k.t, ws, "set-model-and-conf", "")
	return &sceneWatcher{t: k.t, ws: ws}
}

// until reads frames until one of type typ (and text, if not "") and
// returns them.
func (w *sceneWatcher) until(typ, text string) []frame {
	w.t.Helper()
	return readFramesUntil(w.t, w.ws, typ, text)
}

// readFramesUntil reads a watcher's frames until one of type typ (and
// text, if not "") and returns them.
func readFramesUntil(t testing.TB, ws *websocket.Conn, typ, text string) []frame {
	t.Helper()
	var got []frame
	_ = ws.SetReadDeadline(time.Now().Add(guard))
	for {
		var f frame
		if err := ws.ReadJSON(&f); err != nil {
			t.Fatalf("watcher waiting for %s %s: %v (after %d frames)", typ, text, err, len(got))
		}
		got = append(got, f)
		if f.Type == typ && (text == "" || f.Text == text) {
			return got
		}
	}
}

// sceneTexts are a scene's lines as "speaker: text" (interrupted: "~").
func sceneTexts(in protocol.SceneInfo) []string {
	var out []string
	for _, l := range in.Lines {
		s := l.Speaker + ": " + l.Text
		if l.Interrupted {
			s += " ~"
		}
		out = append(out, s)
	}
	return out
}
