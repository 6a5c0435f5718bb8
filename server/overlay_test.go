package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"koe/conversation"
	"koe/protocol"
)

// overlayGet fetches path with optional extra headers (name, value pairs)
// and returns the status, headers and body.
func overlayGet(t *testing.T, url string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// TestOverlayAPI: GET /api/characters/:conf_uid/overlay gives the page a
// character's name and avatar pictures as /avatars URLs, emotions keyed by
// the expression an audio frame carries; "default" is the default
// character; unknown characters are 404; the API's origin and token
// checks apply.
func TestOverlayAPI(t *testing.T) {
	llm := startLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Server.AuthToken = "overlay-secret"
	cfg.Character.Overlay.Avatar = conversation.AvatarConfig{
		Idle: "koe/idle.png", Talking: "koe/talk ing.png", Blink: "koe/blink.png", Threshold: 0.2,
		Emotions:        map[string]string{"joy": "koe/joy.png", "sadness": "koe/sad.png"},
		EmotionsTalking: map[string]string{"joy": "koe/joy-talk.png"},
	}
	writeFile(t, filepath.Join(cfg.CharactersDir, "plain.yaml"), []byte("conf_name: Plain\nconf_uid: plain\ncharacter_name: Plainy\noverlay:\n  avatar:\n    idle: \"\"\n    talking: \"\"\n"))
	m := startKoe(t, cfg)
	base := "http://" + m.Addr()
	auth := []string{"Authorization", "Bearer overlay-secret"}

	want := protocol.OverlayView{ConfUID: "koe_default", ConfName: "koe", Name: "Koe",
		EmotionKeywords: []string{"anger", "disgust", "fear", "joy", "neutral", "sadness", "smirk", "surprise"}, Avatar: &protocol.AvatarView{
			Idle: "/avatars/koe/idle.png", Talking: "/avatars/koe/talk%20ing.png", Blink: "/avatars/koe/blink.png", Threshold: 0.2,
			Emotions: map[string]protocol.EmotionView{
				"3": {Name: "joy", Idle: "/avatars/koe/joy.png", Talking: "/avatars/koe/joy-talk.png"}, // mao_pro's emotionMap
				"1": {Name: "sadness", Idle: "/avatars/koe/sad.png"},
			},
		}}
	for _, conf := range []string{"koe_default", "default"} {
		code, hdr, body := overlayGet(t, base+"/api/characters/"+conf+"/overlay", auth...)
		var got protocol.OverlayView
		if err := json.Unmarshal(body, &got); err != nil || code != 200 {
			t.Fatalf("GET overlay of %s = %d %s (%v)", conf, code, body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("overlay of %s =\n%+v\nwant\n%+v", conf, got.Avatar, want.Avatar)
		}
		if hdr.Get("Cache-Control") != "no-store" {
			t.Errorf("overlay of %s: Cache-Control %q", conf, hdr.Get("Cache-Control"))
		}
	}

	// A character without pictures: subtitles only.
	code, _, body := overlayGet(t, base+"/api/characters/plain/overlay", auth...)
	if code != 200 || !strings.Contains(string(body), `"avatar":null`) || !strings.Contains(string(body), `"name":"Plainy"`) {
		t.Errorf("overlay of a character without pictures = %d %s", code, body)
	}

	code, _, body = overlayGet(t, base+"/api/characters/nobody/overlay", auth...)
	if code != 404 || !strings.Contains(string(body), "nobody") {
		t.Errorf("overlay of an unknown character = %d %s, want 404 naming it", code, body)
	}
	if code, _, _ := overlayGet(t, base+"/api/characters/default/overlay"); code != 401 {
		t.Errorf("overlay without the token = %d, want 401", code)
	}
	if code, _, _ := overlayGet(t, base+"/api/characters/default/overlay", append(auth, "Origin", evilOrigin)...); code != 403 {
		t.Errorf("overlay from a foreign page = %d, want 403", code)
	}
}

// TestOverlayPage: /overlay serves koe's embedded overlay, with its
// script and style, under a page policy, also when web_client_dir serves
// another client at /.
func TestOverlayPage(t *testing.T) {
	llm := startLLM(t, nil)
	for _, webClient := range []bool{false, true} {
		cfg := testConfig(t, t.TempDir(), llm.URL())
		if webClient {
			cfg.Server.WebClientDir = t.TempDir()
			writeFile(t, filepath.Join(cfg.Server.WebClientDir, "index.html"), []byte("<!doctype html><title>olv</title>"))
			writeFile(t, filepath.Join(cfg.Server.WebClientDir, "overlay.js"), []byte("the web client's own file"))
		}
		m := startKoe(t, cfg)
		base := "http://" + m.Addr()
		for path, want := range map[string]struct{ typ, has string }{
			"/overlay":             {"text/html", `src="/overlay/overlay.js"`},
			"/overlay/":            {"text/html", `src="/overlay/overlay.js"`},
			"/overlay/overlay.js":  {"text/javascript", "watch_conf="},
			"/overlay/overlay.css": {"text/css", "background: transparent"},
		} {
			code, hdr, body := overlayGet(t, base+path)
			if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), want.typ) || !strings.Contains(string(body), want.has) {
				t.Errorf("web client %v: GET %s = %d %s, %.80q", webClient, path, code, hdr.Get("Content-Type"), body)
			}
			if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self' ws://"+m.Addr()) {
				t.Errorf("web client %v: GET %s has the policy %q", webClient, path, csp)
			}
		}
		if code, _, _ := overlayGet(t, base+"/overlay/nothing.js"); code == 200 && !webClient {
			t.Errorf("GET /overlay/nothing.js = 200")
		}
		if webClient {
			if _, _, body := overlayGet(t, base+"/"); !strings.Contains(string(body), "<title>olv</title>") {
				t.Errorf("with web_client_dir, / = %.80q", body)
			}
			if _, _, body := overlayGet(t, base+"/overlay.js"); string(body) != "the web client's own file" {
				t.Errorf("with web_client_dir, /overlay.js = %.80q, want the web client's file", body)
			}
		}
	}
}
