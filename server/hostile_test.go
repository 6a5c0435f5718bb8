package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"koe/testkit/fakellm"
)

// Every message type with wrong field types, deep nesting, huge strings,
// numbers no float holds and path-traversal ids: each gets an error frame
// and the connection answers the heartbeat after it, while another
// session keeps turning.
func TestHostileInput(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	hostile := dialGreeted(t, m.Addr())
	friend := dialGreeted(t, m.Addr())

	types := []string{
		"text-input", "mic-audio-data", "mic-audio-end", "raw-audio-data", "raw-audio-config",
		"ai-speak-signal", "interrupt-signal", "frontend-playback-complete", "fetch-history-list",
		"fetch-and-set-history", "fetch-history-page", "create-new-history", "delete-history",
		"fetch-configs", "switch-config", "fetch-backgrounds", "heartbeat", "request-init-config",
		"audio-play-start", "fetch-memory-state", "set-compression-rate", "fetch-system-prompt",
		"set-system-prompt", "fetch-reminder", "set-reminder", "fetch-context",
	}
	// Each field with a value of the wrong JSON type.
	wrong := map[string]string{
		"text": `5`, "images": `"x"`, "history_uid": `[]`, "file": `{}`, "audio": `"x"`,
		"idle_time": `"x"`, "sample_rate": `"x"`, "rate": `"x"`, "prompt": `5`, "reminder": `[1]`,
		"before": `-1`, "limit": `"x"`,
	}
	var frames []string
	for _, typ := range types {
		for field, value := range wrong {
			frames = append(frames, fmt.Sprintf(`{"type":%q,%q:%s}`, typ, field, value))
		}
	}
	deep := strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000)
	frames = append(frames,
		`{"type":"text-input","text":`+deep+`}`,
		`{"type":`+deep+`}`,
		`{"type":"`+strings.Repeat("x", 1<<20)+`"}`,
		`{"type":"mic-audio-data","audio":[0.1,1e999]}`,
		`{"type":"raw-audio-data","audio":[-1e308]}`,
		`{"type":"mic-audio-data","audio":[2]}`,
		`{"type":"fetch-and-set-history","history_uid":"../../../../etc/passwd"}`,
		`{"type":"fetch-history-page","history_uid":"../x","before":1}`,
		`{"type":"delete-history","history_uid":"..%2F..%2Fkoe.db"}`,
		`{"type":"switch-config","file":"../../../etc/passwd"}`,
		`{"type":"switch-config","file":"/etc/passwd"}`,
		`{"type":"switch-config","file":"`+strings.Repeat("a", 1<<16)+`.yaml"}`,
		`{"type":"raw-audio-config","sample_rate":44056}`,
		`{"type":"raw-audio-config","sample_rate":-48000}`,
		`{"type":"set-compression-rate","rate":1e308}`,
		`{"type":"text-input","images":[{"source":"camera","data":"data:text/html;base64,PHNjcmlwdD4=","mime_type":"text/html"}]}`,
		`{"type":"text-input","images":[{"source":"camera","data":"data:image/png;base64,PHNjcmlwdD4=","mime_type":"image/png"}]}`,
		`not json at all`, `[]`, `null`, `{"type":null}`, `{"type":""}`,
	)

	friend.send(msg{"type": "text-input", "text": "keep talking", "images": []any{}})
	friendTurns := 0
	for i, frame := range frames {
		hostile.sendRaw([]byte(frame))
		got := hostile.next()
		if got.typ() != "error" {
			t.Fatalf("frame %d (%.80s…): got %v, want an error frame", i, frame, got)
		}
		if len(got.str("message")) > 400 {
			t.Fatalf("frame %d: the error echoes too much (%d bytes): %.120s", i, len(got.str("message")), got.str("message"))
		}
		hostile.alive()
		// The other session turns on meanwhile.
		if i%25 == 0 {
			friend.until(isType("backend-synth-complete"))
			friend.send(msg{"type": "frontend-playback-complete"})
			friend.until(isControl("conversation-chain-end"))
			friendTurns++
			friend.send(msg{"type": "text-input", "text": fmt.Sprintf("turn %d", friendTurns), "images": []any{}})
		}
	}
	friend.until(isControl("conversation-chain-end"))

	// A binary frame of half a sample, then one over the size limit.
	if err := hostile.ws.WriteMessage(websocket.BinaryMessage, []byte{1}); err != nil {
		t.Fatal(err)
	}
	if m := hostile.next(); m.typ() != "error" {
		t.Fatalf("odd binary frame: %v", m)
	}
	hostile.alive()
	// Path traversal over REST.
	for _, path := range []string{
		"/api/histories/..%2F..%2Fetc/passwd/messages",
		"/api/histories/koe_default/..%2Fkoe.db/images/1-0",
		"/api/characters/..%2F..%2Fetc/prompts/system",
	} {
		status, _ := httpDo(t, "GET", "http://"+m.Addr()+path, "", "")
		if status != http.StatusBadRequest && status != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 400 or 404", path, status)
		}
	}
	hostile.alive()
	friend.turn("still here?")
}
