package static_test

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// TestFavicon: /favicon.ico, which browsers (OBS's source too) ask for on
// every page, is a real icon: koe's own, whether koe serves its pages or
// a web client's folder without an icon, and the web client's when its
// folder has one.
func TestFavicon(t *testing.T) {
	llm := koetest.StartLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Hi.")}))
	get := func(addr string) (string, []byte) {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/favicon.ico")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /favicon.ico: HTTP %d %q", resp.StatusCode, body)
		}
		return resp.Header.Get("Content-Type"), body
	}
	// koe's icon: an ICO file whose one image is a 32x32 PNG.
	expectKoeIcon := func(typ string, body []byte) {
		t.Helper()
		if typ != "image/x-icon" || len(body) < 22 {
			t.Fatalf("the icon is %q, %d bytes", typ, len(body))
		}
		var head struct {
			Reserved, Type, Count uint16
			W, H, Colors, _       uint8
			Planes, Bits          uint16
			Size, Offset          uint32
		}
		if err := binary.Read(bytes.NewReader(body), binary.LittleEndian, &head); err != nil {
			t.Fatal(err)
		}
		if head.Reserved != 0 || head.Type != 1 || head.Count != 1 || int(head.Offset)+int(head.Size) != len(body) {
			t.Fatalf("not an icon file: %+v", head)
		}
		img, err := png.Decode(bytes.NewReader(body[head.Offset:]))
		if err != nil {
			t.Fatalf("the icon's picture: %v", err)
		}
		if b := img.Bounds(); b.Dx() != 32 || b.Dy() != 32 || int(head.W) != 32 || int(head.H) != 32 {
			t.Fatalf("the icon is %v (%dx%d in its directory), want 32x32", b, head.W, head.H)
		}
	}

	cfg := testConfig(t, t.TempDir(), llm)
	koe := koetest.StartKoe(t, cfg)
	expectKoeIcon(get(koe.Addr()))

	// A web client's folder without an icon: koe's.
	web := t.TempDir()
	if err := os.WriteFile(filepath.Join(web, "index.html"), []byte("<!doctype html><title>client</title>"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = testConfig(t, t.TempDir(), llm)
	cfg.Server.WebClientDir = web
	koe = koetest.StartKoe(t, cfg)
	expectKoeIcon(get(koe.Addr()))

	// With one: the client's, as it is.
	own := []byte("\x00\x00\x01\x00the client's own icon")
	if err := os.WriteFile(filepath.Join(web, "favicon.ico"), own, 0o600); err != nil {
		t.Fatal(err)
	}
	if typ, body := get(koe.Addr()); typ != "image/x-icon" || !bytes.Equal(body, own) {
		t.Fatalf("with the client's icon in its folder, /favicon.ico is %q %q", typ, body)
	}
}
