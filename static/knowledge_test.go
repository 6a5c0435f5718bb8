package static_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"koe/testkit/cdp"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// kbDocsJS lists the documents panel: each entry's name and sizes.
const kbDocsJS = `[...document.querySelectorAll("#doc-list li")].map((li) => ({
	Name: li.querySelector(".doc-name").textContent, Size: li.querySelector(".doc-size").textContent}))`

type kbListed struct{ Name, Size string }

// kbSetFiles puts files into a file input the way a user picking them
// does: Chromium fires the input's change event.
func (p *pageT) kbSetFiles(selector string, paths ...string) {
	p.t.Helper()
	ctx, cancel := p.ctx()
	defer cancel()
	var found struct {
		Result struct {
			ObjectID string `json:"objectId"`
		} `json:"result"`
	}
	err := p.p.Call(ctx, "Runtime.evaluate", map[string]any{"expression": `document.querySelector(` + jsString(selector) + `)`}, &found)
	if err != nil || found.Result.ObjectID == "" {
		p.fail(err)
	}
	if err := p.p.Call(ctx, "DOM.setFileInputFiles", map[string]any{"files": paths, "objectId": found.Result.ObjectID}, nil); err != nil {
		p.fail(err)
	}
}

func (p *pageT) kbDocs() []kbListed {
	p.t.Helper()
	var out []kbListed
	p.eval(kbDocsJS, &out)
	return out
}

// TestChatPageDocuments drives the documents panel and the attach button
// in headless Chromium: files picked through the real file inputs go up
// through the REST route and the WebSocket; what koe answers shows as
// text.
func TestChatPageDocuments(t *testing.T) {
	browser := cdp.LaunchTest(t, cdp.Options{Width: 900, Height: 800, MuteAudio: true})
	llm := koetest.StartLLM(t, func(r fakellm.Request) fakellm.Reply {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, `{"documents"`) {
				return fakellm.Reply{Tokens: fakellm.Words("No spam and be kind [1].")}
			}
		}
		return fakellm.Reply{Tokens: fakellm.Words("Okay.")}
	})
	koe := koetest.StartKoe(t, testConfig(t, t.TempDir(), llm))
	testdata := func(name string) string {
		path, err := filepath.Abs(filepath.Join("..", "knowledge", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	// A file whose name would run script if the page took it as HTML.
	evilFile := filepath.Join(t.TempDir(), evil+".md")
	if err := os.WriteFile(evilFile, []byte("# Notes\n\nThe password is swordfish.\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	p := openPage(t, browser)
	p.navigate("http://" + koe.Addr() + "/")
	p.waitFor(`document.getElementById("status").textContent === "connected"`)
	p.click("#docs summary")
	p.waitFor(`document.getElementById("doc-summary").textContent === "(none)"`)

	// Two files picked at once: both listed with their sizes, and the
	// ingest's status events shown as they come.
	p.eval(`window.kbStatus = [];
		new MutationObserver(() => kbStatus.push(document.getElementById("doc-status").textContent))
			.observe(document.getElementById("doc-status"), {subtree: true, childList: true, characterData: true})`, nil)
	p.kbSetFiles("#doc-files", testdata("story.md"), evilFile)
	p.waitFor(`koeDebug.uploads === 2 && document.querySelectorAll("#doc-list li").length === 2`)
	sizes := regexp.MustCompile(`^[1-9][\d,]* tokens · [1-9][\d,]* chunks?$`)
	names := map[string]bool{}
	for _, d := range p.kbDocs() {
		names[d.Name] = true
		if !sizes.MatchString(d.Size) {
			t.Fatalf("%s is listed as %q", d.Name, d.Size)
		}
	}
	if !names["story.md"] || !names[evil+".md"] {
		t.Fatalf("listed %+v", p.kbDocs())
	}
	if p.evalBool(`window.koeAlerted === 1 || document.querySelector("#docs img") !== null`) {
		t.Fatal("a file name ran as HTML")
	}
	var seen []string
	p.eval(`kbStatus`, &seen)
	// Reading and the first percent may come in one task of the page.
	during := slices.ContainsFunc(seen, func(s string) bool {
		return s == "Reading story.md" || regexp.MustCompile(`^Indexing story\.md: \d+%$`).MatchString(s)
	})
	if !during || !slices.Contains(seen, "Indexed story.md") {
		t.Fatalf("ingest status shown: %q", seen)
	}
	p.waitFor(`/^\(2 · [\d,]+ tokens\)$/.test(document.getElementById("doc-summary").textContent)`)

	// A refused file: its reason, and nothing listed.
	p.kbSetFiles("#doc-files", testdata("image.png"))
	p.waitFor(`koeDebug.uploads === 3`)
	var refused []string
	p.eval(`[...document.querySelectorAll("#doc-refused li")].map((li) => li.textContent)`, &refused)
	if len(refused) != 1 || !strings.HasPrefix(refused[0], "image.png: ") || len(refused[0]) < len("image.png: ")+10 {
		t.Fatalf("refusals shown: %q", refused)
	}
	if n := len(p.kbDocs()); n != 2 {
		t.Fatalf("%d documents after a refusal", n)
	}
	p.waitFor(`document.getElementById("doc-status").classList.contains("error") &&
		document.getElementById("doc-status").textContent.startsWith("Could not index image.png: ")`)

	// Delete one.
	p.click(`#doc-list li button[aria-label="Delete ` + evil + `.md"]`)
	p.waitFor(`document.querySelectorAll("#doc-list li").length === 1`)
	if d := p.kbDocs(); d[0].Name != "story.md" {
		t.Fatalf("after delete: %+v", d)
	}
	p.screenshot("documents.png")

	// Attach to this chat: the chip, then a reply citing it.
	p.kbSetFiles("#attach-files", testdata("rules.html"))
	p.waitFor(`document.querySelector("#log .msg.file") !== null`)
	var chip string
	p.eval(`document.querySelector("#log .msg.file").textContent`, &chip)
	if !regexp.MustCompile(`^📎 rules\.html · [1-9][\d,]* tokens · \[1\]$`).MatchString(chip) {
		t.Fatalf("attach chip = %q", chip)
	}
	p.say("what are the rules?")
	p.waitFor(`document.querySelector("#log .citations li") !== null`)
	var cites []string
	p.eval(`[...document.querySelectorAll("#log .citations li")].map((li) => li.textContent)`, &cites)
	if len(cites) != 1 || !strings.HasPrefix(cites[0], "[1] ") || !strings.HasSuffix(cites[0], " — rules.html") {
		t.Fatalf("citations shown: %q", cites)
	}
	if p.evalBool(`document.querySelector("#log .citations").previousElementSibling.matches(".msg.ai") === false`) {
		t.Fatal("the citations are not under the reply")
	}

	// A refused attachment shows its reason.
	p.kbSetFiles("#attach-files", testdata("broken.pdf"))
	p.waitFor(`document.querySelector("#log .msg.file.refused") !== null`)
	var refusedChip string
	p.eval(`document.querySelector("#log .msg.file.refused").textContent`, &refusedChip)
	if !strings.HasPrefix(refusedChip, "📎 broken.pdf: ") || len(refusedChip) < len("📎 broken.pdf: ")+10 {
		t.Fatalf("refused attachment = %q", refusedChip)
	}
	p.screenshot("attach.png")
}
