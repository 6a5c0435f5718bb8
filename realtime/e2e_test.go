package realtime_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/config"
	"koe/protocol"
	"koe/testkit"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// rtKoe starts a koe speaking through the fake server's speech endpoint,
// whose model answers with respond; edit, if set, changes the
// configuration first.
func rtKoe(t *testing.T, respond func(fakellm.Request) fakellm.Reply, edit ...func(*config.Config)) (addr string, llm *fakellm.Server) {
	t.Helper()
	llm = koetest.StartLLM(t, respond)
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	for _, e := range edit {
		e(&cfg)
	}
	m := koetest.StartKoe(t, cfg)
	return m.Addr(), llm
}

func answer(tokens ...string) func(fakellm.Request) fakellm.Reply {
	return func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Tokens: tokens} }
}

// rtTrace is the events read so far, normalised for a golden file: one
// line per event, ids numbered in order of appearance, audio and times
// left out. It also checks that every event has an event_id of its own.
func rtTrace(t *testing.T, events []rtEvent) []byte {
	t.Helper()
	seen := map[string]bool{}
	names := map[string]string{}
	counts := map[string]int{}
	idRE := regexp.MustCompile(`"((?:item|resp|sess|conv)_[0-9a-f]{12}[0-9a-z]+)"`)
	var b bytes.Buffer
	for _, e := range events {
		id, _ := e.m["event_id"].(string)
		if !strings.HasPrefix(id, "event_") || seen[id] {
			t.Errorf("event %s has event_id %q: missing, or not its own", e.typ(), id)
		}
		seen[id] = true
		m := map[string]any{}
		for k, v := range e.m {
			m[k] = v
		}
		delete(m, "event_id")
		if strings.HasSuffix(e.typ(), "audio.delta") {
			m["delta"] = "<audio>"
		}
		if s, ok := m["session"].(map[string]any); ok {
			s["expires_at"] = 0
		}
		// Token counts count the prompt, which holds the date and time:
		// they are checked where a test needs them, never in a golden.
		if r, ok := m["response"]; ok {
			m["response"] = rtaWithoutUsage(r)
		}
		line, _ := json.Marshal(m)
		line = idRE.ReplaceAllFunc(line, func(q []byte) []byte {
			id := string(q[1 : len(q)-1])
			if names[id] == "" {
				kind := id[:strings.IndexByte(id, '_')]
				counts[kind]++
				names[id] = fmt.Sprintf("%s_%d", kind, counts[kind])
			}
			return []byte(`"` + names[id] + `"`)
		})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// checkGolden compares got with testdata/name, or rewrites it (-update).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := at(gl, i), at(wl, i)
			if g != w {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run with -update after an intended change)", path, i+1, g, w)
			}
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<none>"
}

// stored reads the one history of the default character over REST, once
// it holds n messages: response.done comes when the reply is sent, and
// the turn stores it after.
func stored(t *testing.T, addr string, n int) []protocol.ChatMessage {
	t.Helper()
	return testkit.Await(t, "the history's messages", func() ([]protocol.ChatMessage, bool) {
		var list protocol.HistoryList
		getJSON(t, "http://"+addr+"/api/histories/koe_default", &list)
		if len(list.Histories) != 1 {
			return nil, false
		}
		var h protocol.ChatHistory
		getJSON(t, "http://"+addr+"/api/histories/koe_default/"+list.Histories[0].UID, &h)
		return h.Messages, len(h.Messages) >= n
	})
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// A typed turn in the GA dialect, spoken: the events in the API's order,
// ids that agree with each other, the reply stored like any koe turn.
func TestRealtimeTextTurnTrace(t *testing.T) {
	addr, llm := rtKoe(t, answer("Hello ", "there. ", "How are ", "you?"))
	c := rtDial(t, addr, "", nil)
	created := c.expect("session.created")
	if created.str("session.type") != "realtime" || created.at("session.audio.output.format.rate") != float64(24000) {
		t.Errorf("session.created is not a GA session at 24 kHz: %s", created.raw)
	}
	c.expect("conversation.created")
	c.say("hi")
	done := c.until("response.done")
	checkGolden(t, "text_turn.jsonl", rtTrace(t, c.got))

	if done.str("response.status") != "completed" {
		t.Errorf("response.done status = %q, want completed", done.str("response.status"))
	}
	var usage struct {
		Response struct {
			Usage struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
				TotalTokens  int `json:"total_tokens"`
			} `json:"usage"`
		} `json:"response"`
	}
	_ = json.Unmarshal(done.raw, &usage)
	if u := usage.Response.Usage; u.InputTokens == 0 || u.OutputTokens == 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Errorf("response.done usage = %+v, want the turn's token counts", u)
	}
	var audio int
	for _, e := range c.got {
		if e.typ() == "response.output_audio.delta" {
			audio++
			if e.str("response_id") != done.str("response.id") {
				t.Errorf("an audio delta names response %q, not %q", e.str("response_id"), done.str("response.id"))
			}
		}
	}
	if audio == 0 {
		t.Error("no response.output_audio.delta")
	}
	reqs := llm.Requests()
	if last := reqs[len(reqs)-1].Messages; !strings.Contains(last[len(last)-1].Content, "hi") {
		t.Errorf("the LLM was not asked about the user's item: %+v", last[len(last)-1])
	}
	msgs := stored(t, addr, 2)
	if len(msgs) != 2 || msgs[0].Type != protocol.MessageHuman || msgs[0].Content != "hi" ||
		msgs[1].Type != protocol.MessageAI || msgs[1].Content != "Hello there. How are you?" {
		t.Errorf("stored history = %+v, want the user's item and the reply", msgs)
	}
}

// The beta dialect, asked for by header or by subprotocol: its flat
// session and its event names (response.text.delta, conversation.item.created).
func TestRealtimeBetaDialectTrace(t *testing.T) {
	addr, _ := rtKoe(t, answer("Hello ", "there."))
	c := rtDial(t, addr, "", http.Header{"OpenAI-Beta": {"realtime=v1"}})
	created := c.expect("session.created")
	if created.str("session.input_audio_format") != "pcm16" || created.at("session.modalities") == nil {
		t.Errorf("session.created is not a beta session: %s", created.raw)
	}
	c.expect("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"modalities": []string{"text"}}})
	c.expect("session.updated")
	c.say("hi")
	c.until("response.done")
	checkGolden(t, "beta_text_turn.jsonl", rtTrace(t, c.got))

	b := rtDial(t, addr, "", nil, "realtime", "openai-beta.realtime-v1")
	if b.ws.Subprotocol() != "realtime" {
		t.Errorf("subprotocol = %q, want realtime echoed", b.ws.Subprotocol())
	}
	if e := b.expect("session.created"); e.str("session.input_audio_format") != "pcm16" {
		t.Errorf("the beta subprotocol did not give the beta dialect: %s", e.raw)
	}
}

// koe's token: refused without it or with a wrong one, before the
// upgrade; taken as a bearer token or as the browser SDKs' subprotocol.
func TestRealtimeAuth(t *testing.T) {
	const token = "s3cret-token"
	addr, _ := rtKoe(t, answer("ok"), func(c *config.Config) { c.Server.AuthToken = token })
	for name, h := range map[string]http.Header{"none": nil, "wrong": {"Authorization": {"Bearer nope"}}} {
		if _, resp, err := rtTryDial(t, addr, "", h); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s token: err %v, response %v; want 401", name, err, resp)
		}
	}
	if _, resp, err := rtTryDial(t, addr, "", nil, "realtime", "openai-insecure-api-key.nope"); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong subprotocol key: err %v; want 401", err)
	}
	c := rtDial(t, addr, "", http.Header{"Authorization": {"Bearer " + token}})
	c.expect("session.created")
	b := rtDial(t, addr, "", nil, "realtime", "openai-insecure-api-key."+token, "openai-beta.realtime-v1")
	if b.ws.Subprotocol() != "realtime" {
		t.Errorf("subprotocol = %q, want realtime", b.ws.Subprotocol())
	}
	b.expect("session.created")
}

// session.update and response.create's overrides reach the LLM's request;
// an invalid update is refused naming its event and changes nothing.
func TestRealtimeSessionUpdateReachesLLM(t *testing.T) {
	addr, llm := rtKoe(t, answer("Arr."))
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "session.update", "event_id": "up1", "session": map[string]any{
		"type": "realtime", "instructions": "Speak like a pirate.", "output_modalities": []string{"text"},
		"max_output_tokens": 77, "temperature": 0.3, "unknown_field": true}})
	up := c.expect("session.updated")
	if up.str("session.instructions") != "Speak like a pirate." || up.at("session.max_output_tokens") != float64(77) {
		t.Errorf("session.updated = %s", up.raw)
	}
	c.send(map[string]any{"type": "session.update", "event_id": "up2", "session": map[string]any{
		"instructions": "Whisper.", "temperature": 5}})
	bad := c.expect("error")
	if bad.str("error.event_id") != "up2" || bad.str("error.param") != "session.temperature" {
		t.Errorf("error = %s, want one naming up2 and session.temperature", bad.raw)
	}
	c.say("hello")
	c.until("response.done")
	req := lastRequest(t, llm)
	if !strings.Contains(req.Messages[0].Content, "Speak like a pirate.") || strings.Contains(req.Messages[0].Content, "Whisper.") {
		t.Errorf("system prompt = %q, want the first update's instructions only", req.Messages[0].Content)
	}
	var raw struct {
		Temperature float64 `json:"temperature"`
		MaxTokens   int     `json:"max_tokens"`
	}
	_ = json.Unmarshal(req.Raw, &raw)
	if raw.Temperature < 0.29 || raw.Temperature > 0.31 || raw.MaxTokens != 77 {
		t.Errorf("request temperature %v, max_tokens %d; want 0.3 and 77", raw.Temperature, raw.MaxTokens)
	}
	// One response's own instructions and length.
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "again"}}}})
	c.send(map[string]any{"type": "response.create", "response": map[string]any{"instructions": "Answer in French.", "max_output_tokens": 12}})
	c.until("response.done")
	req = lastRequest(t, llm)
	_ = json.Unmarshal(req.Raw, &raw)
	if !strings.Contains(req.Messages[0].Content, "Answer in French.") || strings.Contains(req.Messages[0].Content, "pirate") || raw.MaxTokens != 12 {
		t.Errorf("response overrides not in the request: system %q, max_tokens %d", req.Messages[0].Content, raw.MaxTokens)
	}
}

func lastRequest(t *testing.T, llm *fakellm.Server) fakellm.Request {
	t.Helper()
	reqs := llm.Requests()
	if len(reqs) == 0 {
		t.Fatal("the LLM got no request")
	}
	return reqs[len(reqs)-1]
}

// response.cancel mid-reply stops the turn through koe's interrupt: what
// the client was sent is what the history keeps, and response.done says
// cancelled. Before, the message is retrieved as it is being said.
func TestRealtimeCancelMidReply(t *testing.T) {
	release := make(chan struct{})
	addr, _ := rtKoe(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"First sentence. ", "Second ", "sentence."}, BeforeChunk: func(i int) {
			if i == 1 {
				select {
				case <-release:
				case <-time.After(testkit.HangGuard):
				}
			}
		}}
	})
	// Before koe closes, which waits for the held request.
	t.Cleanup(func() { close(release) })
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"output_modalities": []string{"text"}}})
	c.expect("session.updated")
	c.say("tell me")
	delta := c.until("response.output_text.delta")
	if delta.str("delta") != "First sentence. " {
		t.Fatalf("first delta = %q", delta.str("delta"))
	}
	// The message being said is retrieved in progress, as far as it went
	// (the SDK's types declare the item: it is never null).
	c.send(map[string]any{"type": "conversation.item.retrieve", "item_id": delta.str("item_id")})
	got := c.until("conversation.item.retrieved")
	content, _ := got.at("item.content").([]any)
	if got.str("item.id") != delta.str("item_id") || got.str("item.role") != "assistant" || got.str("item.status") != "in_progress" ||
		len(content) != 1 || content[0].(map[string]any)["text"] != "First sentence. " {
		t.Fatalf("retrieved %s", got.raw)
	}
	// One response at a time.
	c.send(map[string]any{"type": "response.create", "event_id": "again"})
	if e := c.expect("error"); e.str("error.event_id") != "again" || e.str("error.code") != "conversation_already_has_active_response" {
		t.Errorf("a second response.create answered %s", e.raw)
	}
	c.send(map[string]any{"type": "response.cancel", "event_id": "cancel1"})
	done := c.until("response.done")
	if done.str("response.status") != "cancelled" || done.str("response.status_details.reason") != "client_cancelled" {
		t.Errorf("response.done = %s, want cancelled by the client", done.raw)
	}
	for _, e := range c.got {
		if e.typ() == "response.output_text.done" && e.str("text") != "First sentence. " {
			t.Errorf("output_text.done text = %q, want what was sent", e.str("text"))
		}
	}
	msgs := stored(t, addr, 2)
	if len(msgs) != 2 || msgs[1].Content != "First sentence. " || !msgs[1].AdditionalKwargs.Interrupted {
		t.Errorf("stored = %+v, want the reply as far as it was sent, marked interrupted", msgs)
	}
	// Nothing running: a cancel now is an error, and the socket lives.
	c.send(map[string]any{"type": "response.cancel", "event_id": "cancel2"})
	if e := c.expect("error"); e.str("error.event_id") != "cancel2" || e.str("error.code") != "response_cancel_not_active" {
		t.Errorf("second cancel answered %s", e.raw)
	}
}

// An item no response has answered can be deleted; an answered one is in
// the history and cannot.
func TestRealtimeItemDelete(t *testing.T) {
	addr, llm := rtKoe(t, answer("Sure."))
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"id": "item_a", "type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "forget this"}}}})
	c.until("conversation.item.done")
	c.send(map[string]any{"type": "conversation.item.delete", "event_id": "del1", "item_id": "item_a"})
	if e := c.expect("conversation.item.deleted"); e.str("item_id") != "item_a" {
		t.Errorf("deleted = %s", e.raw)
	}
	c.send(map[string]any{"type": "conversation.item.create", "item": map[string]any{"id": "item_b", "type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "keep this"}}}})
	c.until("conversation.item.done")
	// previous_item_id "root": before the unanswered item_b.
	c.send(map[string]any{"type": "conversation.item.create", "previous_item_id": "root", "item": map[string]any{"id": "item_c", "type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "first of all"}}}})
	if e := c.until("conversation.item.done"); e.at("previous_item_id") != nil {
		t.Errorf("an item at the root follows %v", e.at("previous_item_id"))
	}
	c.send(map[string]any{"type": "response.create"})
	c.until("response.done")
	last := lastRequest(t, llm).Messages
	if u := last[len(last)-1].Content; strings.Contains(u, "forget this") || !strings.Contains(u, "first of all\nkeep this") {
		t.Errorf("the LLM got %q, want the kept items in their order", u)
	}
	// The history grows at its end only.
	c.send(map[string]any{"type": "conversation.item.create", "event_id": "before_b", "previous_item_id": "item_c", "item": map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "too late"}}}})
	if e := c.expect("error"); e.str("error.event_id") != "before_b" || e.str("error.code") != "unsupported" {
		t.Errorf("an item before answered ones answered %s", e.raw)
	}
	for id, code := range map[string]string{"item_b": "unsupported", "item_zz": "item_not_found"} {
		c.send(map[string]any{"type": "conversation.item.delete", "event_id": "del_" + id, "item_id": id})
		if e := c.expect("error"); e.str("error.event_id") != "del_"+id || e.str("error.code") != code {
			t.Errorf("deleting %s answered %s, want %s", id, e.raw, code)
		}
	}
}

// Bad events are answered with error events naming them, and the socket
// keeps working.
func TestRealtimeBadEvents(t *testing.T) {
	addr, _ := rtKoe(t, answer("Still here."), func(c *config.Config) { c.Server.MaxMessageBytes = 4096 })
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.sendRaw([]byte(`{"type":"conversation.item.create","event_id":"big","pad":"` + strings.Repeat("x", 5000) + `"}`))
	if e := c.expect("error"); e.str("error.code") != "invalid_message" || !strings.Contains(e.str("error.message"), "server.max_message_bytes") {
		t.Errorf("a message over server.max_message_bytes answered %s", e.raw)
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if e := c.expect("error"); e.str("error.code") != "invalid_message" {
		t.Errorf("a binary message answered %s", e.raw)
	}
	cases := []struct {
		raw, eventID, code string
	}{
		{`{not json`, "", "invalid_json"},
		{`{"event_id":"e1"}`, "e1", "missing_required_parameter"},
		{`{"type":"response.explode","event_id":"e2"}`, "e2", "unknown_event"},
		{`{"type":"session.update","event_id":"e3","session":{"output_modalities":["video"]}}`, "e3", "invalid_value"},
		{`{"type":"session.update","event_id":"e4","session":{"audio":{"output":{"format":{"type":"audio/pcm","rate":16000}}}}}`, "e4", "invalid_value"},
		{`{"type":"conversation.item.create","event_id":"e5"}`, "e5", "missing_required_parameter"},
		{`{"type":"conversation.item.create","event_id":"e6","item":{"type":"message","role":"user","content":"x"}}`, "e6", "invalid_value"},
		{`{"type":"conversation.item.create","event_id":"e7","previous_item_id":"nope","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}}`, "e7", "item_not_found"},
		{`{"type":"response.create","event_id":"e8","response":{"conversation":"none"}}`, "e8", "unsupported"},
		{`{"type":"response.create","event_id":"e9","response":{"temperature":"hot"}}`, "e9", "invalid_value"},
		{`{"type":"conversation.item.create","event_id":"e10","item":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"I said so"}]}}`, "e10", "unsupported"},
		{`{"type":"session.update","event_id":"e11","session":{"type":"transcription"}}`, "e11", "unsupported"},
		{`{"type":"session.update","event_id":"e12"}`, "e12", "missing_required_parameter"},
	}
	for _, tc := range cases {
		c.sendRaw([]byte(tc.raw))
		e := c.expect("error")
		if got := e.str("error.event_id"); got != tc.eventID || e.str("error.code") != tc.code || e.str("error.message") == "" {
			t.Errorf("%s answered %s; want code %s for event %q", tc.raw, e.raw, tc.code, tc.eventID)
		}
	}
	c.say("are you there?")
	if done := c.until("response.done"); done.str("response.status") != "completed" {
		t.Errorf("after the bad events, response.done = %s", done.raw)
	}
}

// A watcher of the session (/client-ws?watch=<session.id>) gets the same
// turn the Realtime client heard: one turn, one stream.
func TestRealtimeWatcherSeesTurn(t *testing.T) {
	addr, _ := rtKoe(t, answer("Seen ", "by all."))
	c := rtDial(t, addr, "", nil)
	id := c.expect("session.created").str("session.id")
	w := rtWatcher(t, addr, id)
	watched := make(chan map[string]any, 256)
	go func() {
		defer close(watched)
		for {
			_, data, err := w.ReadMessage()
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(data, &m) == nil {
				watched <- m
			}
		}
	}()
	c.say("hello")
	done := c.until("response.done")
	transcript := ""
	for _, e := range c.got {
		if e.typ() == "response.output_audio_transcript.done" {
			transcript = e.str("transcript")
		}
	}
	var texts []string
	for {
		var m map[string]any
		select {
		case m = <-watched:
		case <-time.After(testkit.HangGuard):
			t.Fatalf("the watcher saw no stored reply; saw %v (response.done %s)", texts, done.raw)
		}
		if m["type"] == "audio" {
			dt, _ := m["display_text"].(map[string]any)
			s, _ := dt["text"].(string)
			texts = append(texts, s)
		}
		if m["type"] == "message" {
			content, _ := m["content"].(map[string]any)
			if content["type"] == "ai" {
				if content["content"] != transcript || strings.Join(texts, "") != transcript {
					t.Errorf("watcher saw %v and stored %q; the client heard %q", texts, content["content"], transcript)
				}
				return
			}
		}
	}
}

// G.711 out: a telephony bridge's session gets 8 kHz μ-law (GA
// audio/pcmu, beta g711_ulaw), a byte per sample, in deltas of 200 ms.
func TestRealtimeG711Output(t *testing.T) {
	addr, _ := rtKoe(t, answer("Hello ", "caller."))
	for name, dial := range map[string]struct {
		header http.Header
		format any
		param  string
	}{
		"ga":   {nil, map[string]any{"type": "audio/pcmu"}, "audio"},
		"beta": {http.Header{"OpenAI-Beta": {"realtime=v1"}}, "g711_ulaw", "output_audio_format"},
	} {
		c := rtDial(t, addr, "", dial.header)
		c.until("conversation.created")
		session := map[string]any{"output_audio_format": dial.format}
		if dial.param == "audio" {
			session = map[string]any{"audio": map[string]any{"output": map[string]any{"format": dial.format}}}
		}
		c.send(map[string]any{"type": "session.update", "session": session})
		c.expect("session.updated")
		c.say("hi")
		c.until("response.done")
		var sizes []int
		for _, e := range c.got {
			if strings.HasSuffix(e.typ(), "audio.delta") {
				b, err := base64.StdEncoding.DecodeString(e.str("delta"))
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, len(b))
			}
		}
		if len(sizes) < 2 || sizes[0] != 1600 {
			t.Errorf("%s: audio deltas of %v bytes, want 1600-byte (200 ms at 8 kHz) deltas", name, sizes)
		}
	}
}

// A voice the character's engine names as the API does (the
// OpenAI-compatible engine) is the one it speaks with from the next turn.
func TestRealtimeVoiceReachesSpeech(t *testing.T) {
	addr, llm := rtKoe(t, answer("Hello."))
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.send(map[string]any{"type": "session.update", "session": map[string]any{"audio": map[string]any{"output": map[string]any{"voice": "ash"}}}})
	if e := c.expect("session.updated"); e.str("session.audio.output.voice") != "ash" {
		t.Errorf("session.updated = %s", e.raw)
	}
	c.say("hi")
	c.until("response.done")
	reqs := llm.SpeechRequests()
	if len(reqs) == 0 || reqs[len(reqs)-1].Voice != "ash" {
		t.Errorf("speech requests %+v, want the voice ash", reqs)
	}
}

// A reply the model cut at its token limit ends its response as
// incomplete, saying why.
func TestRealtimeIncompleteAtTokenLimit(t *testing.T) {
	addr, _ := rtKoe(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"It was a dark and"}, FinishReason: "length"}
	})
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	c.say("tell a story")
	done := c.until("response.done")
	if done.str("response.status") != "incomplete" || done.str("response.status_details.reason") != "max_output_tokens" {
		t.Errorf("response.done = %s, want incomplete at max_output_tokens", done.raw)
	}
}

// What a connection's items hold is bounded by server.max_message_bytes:
// unanswered items past it are refused (the client asks for a response
// first), answered ones are forgotten oldest first.
func TestRealtimeItemsBounded(t *testing.T) {
	addr, _ := rtKoe(t, answer("Noted."), func(c *config.Config) { c.Server.MaxMessageBytes = 4096 })
	c := rtDial(t, addr, "", nil)
	c.until("conversation.created")
	item := func(id string, n int) map[string]any {
		return map[string]any{"type": "conversation.item.create", "event_id": "ev_" + id, "item": map[string]any{"id": id, "type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": strings.Repeat("a", n)}}}}
	}
	c.send(item("first", 1000))
	c.until("conversation.item.done")
	c.send(item("second", 1500))
	if e := c.expect("error"); e.str("error.event_id") != "ev_second" || !strings.Contains(e.str("error.message"), "server.max_message_bytes") {
		t.Errorf("an item past the bound answered %s", e.raw)
	}
	c.send(map[string]any{"type": "response.create"})
	c.until("response.done")
	c.send(item("third", 1500))
	c.until("conversation.item.done")
	c.send(map[string]any{"type": "conversation.item.delete", "event_id": "del", "item_id": "first"})
	if e := c.expect("error"); e.str("error.code") != "item_not_found" || !strings.Contains(e.str("error.message"), "remembers") {
		t.Errorf("the oldest answered item was not forgotten: %s", e.raw)
	}
	c.send(map[string]any{"type": "conversation.item.delete", "event_id": "del3", "item_id": "third"})
	c.expect("conversation.item.deleted")
}

// ?model= names the character by conf_uid, conf_name or name; anything
// else is the default character.
func TestRealtimeModelNamesCharacter(t *testing.T) {
	addr, llm := rtKoe(t, answer("Arr."), func(c *config.Config) {
		if err := os.MkdirAll(c.CharactersDir, 0o755); err != nil {
			t.Fatal(err)
		}
		alice := "conf_name: alice\nconf_uid: alice_uid\ncharacter_name: Alice\npersona_prompt: You are Alice, a pirate.\n"
		if err := os.WriteFile(filepath.Join(c.CharactersDir, "alice.yaml"), []byte(alice), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	for query, pirate := range map[string]bool{"model=alice_uid": true, "model=Alice": true, "model=gpt-realtime": false, "": false} {
		c := rtDial(t, addr, query, nil)
		c.until("conversation.created")
		c.say("who are you?")
		c.until("response.done")
		var all strings.Builder
		for _, m := range lastRequest(t, llm).Messages {
			all.WriteString(m.Content)
		}
		if got := strings.Contains(all.String(), "You are Alice, a pirate."); got != pirate {
			t.Errorf("?%s: Alice's persona in the request = %v, want %v", query, got, pirate)
		}
	}
}

// rtWatcher follows the Realtime session id as a koe.v1 watcher, from
// its greeting on: the watcher is registered by then, so it sees every
// frame of the turns started after.
func rtWatcher(t *testing.T, addr, id string) *websocket.Conn {
	t.Helper()
	w, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client-ws?koe=1&watch="+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	_ = w.SetReadDeadline(time.Now().Add(testkit.HangGuard))
	for {
		_, data, err := w.ReadMessage()
		if err != nil {
			t.Fatalf("the watcher was not greeted: %v", err)
		}
		var m struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(data, &m) == nil && m.Type == "set-model-and-conf" {
			_ = w.SetReadDeadline(time.Time{})
			return w
		}
	}
}
