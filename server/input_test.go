package server_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"koe/testkit/fakellm"
)

func pngBase64(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// Images ride in the current user message as image parts; later requests
// carry a note instead of repeating the base64; the history keeps them.
func TestImagesReachAVisionModelOnce(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	cfg.Character.LLM.Vision = true
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	img := pngBase64(t)
	c.send(msg{"type": "text-input", "text": "what is this?", "images": []any{
		map[string]any{"source": "camera", "data": "data:image/png;base64," + img, "mime_type": "image/png"},
	}})
	c.until(isType("backend-synth-complete"))
	c.send(msg{"type": "frontend-playback-complete"})
	c.until(isControl("conversation-chain-end"))

	reqs := chatRequests(llm)
	last := reqs[len(reqs)-1].Messages
	if u := last[len(last)-1]; u.Role != "user" || u.Images != 1 || !strings.HasSuffix(u.Content, "\n\nwhat is this?") {
		t.Fatalf("current message = %+v, want one image part", u)
	}
	c.turn("and now?")
	reqs = chatRequests(llm)
	raw := string(reqs[len(reqs)-1].Raw)
	if strings.Contains(raw, img) || !strings.Contains(raw, "shared a camera image here") {
		t.Fatalf("the next request repeats the image or lacks its note: %.300s", raw)
	}
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	records := c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")["messages"].([]any)
	// The history frame carries a reference, never the bytes; the
	// reference serves the image.
	images, _ := records[0].(map[string]any)["images"].([]any)
	if len(images) != 1 || images[0].(map[string]any)["data"] != nil || images[0].(map[string]any)["mime_type"] != "image/png" {
		t.Fatalf("history record = %v", records[0])
	}
	url, _ := images[0].(map[string]any)["url"].(string)
	resp, err := http.Get("http://" + m.Addr() + url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || base64.StdEncoding.EncodeToString(body) != img {
		t.Fatalf("GET %s = %d %s, %d bytes", url, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	base := "http://" + m.Addr() + "/api/histories/koe_default/" + uid + "/images/"
	for ref, want := range map[string]int{"99-0": http.StatusNotFound, "garbage": http.StatusBadRequest} {
		if status, _ := httpDo(t, "GET", base+ref, "", ""); status != want {
			t.Errorf("image %q = %d, want %d", ref, status, want)
		}
	}
}

// A text-only model is told an image was shared instead of getting it.
func TestImagesForATextOnlyModel(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	c.send(msg{"type": "text-input", "text": "look", "images": []any{
		map[string]any{"source": "screen", "data": pngBase64(t), "mime_type": "image/png"},
	}})
	c.until(isType("backend-synth-complete"))
	c.send(msg{"type": "frontend-playback-complete"})
	c.until(isControl("conversation-chain-end"))
	reqs := chatRequests(llm)
	u := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1]
	if u.Images != 0 || !strings.Contains(u.Content, "cannot see images") {
		t.Fatalf("current message = %+v", u)
	}
}

func TestBadImagesAreRefused(t *testing.T) {
	llm := startLLM(t, fakellm.Echo(0))
	m := startKoe(t, testConfig(t, t.TempDir(), llm.URL()))
	c := dialGreeted(t, m.Addr())
	c.expectError(msg{"type": "text-input", "text": "x", "images": []any{map[string]any{"data": "%%%", "mime_type": "image/png"}}}, "base64")
	c.expectError(msg{"type": "text-input", "text": "x", "images": []any{map[string]any{"data": base64.StdEncoding.EncodeToString([]byte("<html></html>")), "mime_type": "image/png"}}}, "text/html")
	c.expectError(msg{"type": "text-input", "text": "x", "images": "not a list"}, "invalid message")
	c.alive()
	if n := len(chatRequests(llm)); n != 0 {
		t.Fatalf("%d LLM calls for refused inputs", n)
	}
}

// ai-speak-signal makes the AI speak on its own; the instruction is not
// shown as a user message.
func TestProactiveSpeech(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Hey, still there?")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Character.TTS.Engine = "none"
	m := startKoe(t, cfg)
	c := dialGreeted(t, m.Addr())
	c.send(msg{"type": "ai-speak-signal", "idle_time": 42})
	frames := c.until(isType("backend-synth-complete"))
	c.send(msg{"type": "frontend-playback-complete"})
	c.until(isControl("conversation-chain-end"))
	if len(audioPieces(frames)) == 0 {
		t.Fatalf("no reply: %v", types(frames))
	}
	reqs := chatRequests(llm)
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	if last.Role != "user" || !strings.Contains(last.Content, "42 seconds") {
		t.Fatalf("proactive instruction = %+v", last)
	}
	uid := c.request(msg{"type": "fetch-history-list"}, "history-list")["histories"].([]any)[0].(map[string]any)["uid"].(string)
	records := c.request(msg{"type": "fetch-and-set-history", "history_uid": uid}, "history-data")["messages"].([]any)
	if len(records) != 1 || records[0].(map[string]any)["role"] != "ai" {
		t.Fatalf("history shows %v, want only the AI's words", records)
	}
}
