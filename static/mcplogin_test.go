package static_test

import (
	"net/http"
	"testing"

	"koe/mcp"
	"koe/testkit/cdp"
	"koe/testkit/koetest"
	"koe/testkit/oauthtest"
)

// An MCP server that needs a login shows on koe's page as a line with the
// consent link; once the user has logged in (the browser sent back to
// koe's callback), koe's event takes the line away.
func TestChatPageMCPLogin(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 700, MuteAudio: true})
	f := oauthtest.Start(t)
	llm := koetest.StartLLM(t, nil)
	cfg := testConfig(t, t.TempDir(), llm)
	cfg.MCP.Servers = map[string]mcp.ServerConfig{"locked": {URL: f.Resource}}
	koe := koetest.StartKoe(t, cfg)
	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)

	// The line shows with the link, whether the consent URL came before
	// the page connected (the API) or after (the event).
	p.waitFor(`!!document.querySelector('#mcp-logins .mcp-login[data-server="locked"] a')`)
	if !p.evalBool(`!document.getElementById("mcp-logins").hidden`) {
		t.Fatal("the line is there but hidden")
	}
	var link string
	p.eval(`document.querySelector('#mcp-logins .mcp-login a').href`, &link)
	p.screenshot("mcp-login.png")

	// The user opens it: the authorization server sends the browser back
	// to koe, which finishes the login.
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/oauth/callback" {
		t.Fatalf("following the link ended at %s with %s", resp.Request.URL, resp.Status)
	}
	p.waitFor(`document.getElementById("mcp-logins").hidden && !document.querySelector("#mcp-logins .mcp-login")`)
}
