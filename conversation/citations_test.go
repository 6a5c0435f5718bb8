package conversation

import (
	"reflect"
	"testing"

	"koe"
	"koe/agent"
	"koe/knowledge"
	"koe/protocol"
)

// The markers models write map to the documents the turn held, in the
// order first cited; numbers that name no document, and repeats, do not.
func TestCitations(t *testing.T) {
	docs := map[int]agent.Document{
		1: {Number: 1, Title: "Stream notes", Source: "notes.md"},
		2: {Number: 2, Title: "Channel rules", Source: "rules.html", Heading: "Links", Page: 0},
		3: {Number: 3, Title: "Weather", Source: "https://example.org/w"},
		4: {Number: 4, Title: "Handbook", Source: "handbook.pdf", Page: 3},
	}
	got := citations("Links need a mod [2]. Fridays [1][4], see [2, 3] and [9] or [x].", docs)
	want := []protocol.Citation{
		{Document: 2, Title: "Channel rules", File: "rules.html", Section: "Links"},
		{Document: 1, Title: "Stream notes", File: "notes.md"},
		{Document: 4, Title: "Handbook", File: "handbook.pdf", Page: 3},
		{Document: 3, Title: "Weather", URL: "https://example.org/w"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("citations =\n%+v\nwant\n%+v", got, want)
	}
	if c := citations("no markers here", docs); c != nil {
		t.Errorf("no markers: %+v", c)
	}
	if c := citations("[1]", nil); c != nil {
		t.Errorf("no documents: %+v", c)
	}
}

// Stored files ride with the next human message when a history is read
// back; files after the last message are pending for the next one.
func TestFilesReplayWhereAttached(t *testing.T) {
	f1 := fileRecord(knowledgeFile("rules.html", "Be kind."), 1)
	f2 := fileRecord(knowledgeFile("notes.md", "Fridays."), 2)
	records := []koe.Record{
		{Role: koe.RoleHuman, Content: "hi"},
		{Role: koe.RoleAI, Content: "hello"},
		f1,
		{Role: koe.RoleHuman, Content: "rules?"},
		{Role: koe.RoleAI, Content: "be kind [1]"},
		f2,
	}
	msgs, pending := toMemory(records)
	if len(msgs) != 4 || len(msgs[0].Files) != 0 || len(msgs[2].Files) != 1 {
		t.Fatalf("messages: %+v", msgs)
	}
	if f := msgs[2].Files[0]; f.Number != 1 || f.Name != "rules.html" || f.Text != "Be kind." || f.Tokens != 3 {
		t.Errorf("file = %+v", f)
	}
	if len(pending) != 1 || pending[0].Number != 2 || pending[0].Name != "notes.md" {
		t.Errorf("pending = %+v", pending)
	}
	if f1.Shown() {
		t.Error("file records are shown to OLV clients")
	}
}

func knowledgeFile(name, text string) knowledge.File {
	return knowledge.File{Name: name, Text: text, Tokens: 3, Format: "text"}
}
