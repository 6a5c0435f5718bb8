package server_test

import (
	"encoding/json"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"koe/agent"
	"koe/app"
	"koe/protocol"
	"koe/testkit/fakellm"
)

// invoke runs one chat API turn and returns the answer.
func invoke(t *testing.T, m *app.Main, req protocol.ChatRequest) protocol.ChatMessage {
	t.Helper()
	resp := postJSON(t, "http://"+m.Addr()+"/api/chat/invoke", req)
	defer resp.Body.Close()
	var answer protocol.ChatMessage
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != 200 {
		t.Fatalf("invoke %q: %d %v", req.Message, resp.StatusCode, err)
	}
	return answer
}

// lastChat is the newest streamed chat request the fake LLM received.
func lastChat(t *testing.T, llm *fakellm.Server) fakellm.Request {
	t.Helper()
	reqs := llm.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Stream {
			return reqs[i]
		}
	}
	t.Fatal("no chat request")
	return fakellm.Request{}
}

// TestRecallAcrossHistories: what a user told the character in one
// conversation reaches the model in a new conversation with the same
// character, as a dated memories block right above the user's message,
// and never reaches another character. Deleting the history forgets it.
func TestRecallAcrossHistories(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Noted.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	if err := os.MkdirAll(cfg.CharactersDir, 0o755); err != nil {
		t.Fatal(err)
	}
	other := "conf_name: other\nconf_uid: other_char\ncharacter_name: Other\n"
	if err := os.WriteFile(filepath.Join(cfg.CharactersDir, "other.yaml"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startKoe(t, cfg)

	told := invoke(t, m, protocol.ChatRequest{Message: "My dog is called Biscuit and he loves the beach."})
	settle(t, m)

	invoke(t, m, protocol.ChatRequest{Message: "What is my dog called again?"})
	req := lastChat(t, llm)
	last := req.Messages[len(req.Messages)-1]
	if last.Role != "user" || !strings.Contains(last.Content, "Memories from earlier conversations") ||
		!strings.Contains(last.Content, "Biscuit") || !strings.HasSuffix(last.Content, "What is my dog called again?") {
		t.Fatalf("the last message does not carry the memory above the question:\n%s", last.Content)
	}
	if !strings.Contains(last.Content, "Human: My dog is called Biscuit") {
		t.Errorf("the memory line is not \"Speaker: text\":\n%s", last.Content)
	}

	invoke(t, m, protocol.ChatRequest{ConfUID: "other_char", Message: "What is my dog called again?"})
	if got := contentOf(lastChat(t, llm)); strings.Contains(got, "Biscuit") {
		t.Errorf("another character recalled the dog:\n%s", got)
	}

	// Deleting the history forgets what was said in it.
	conf, uid := told.AdditionalKwargs.ConfUID, told.AdditionalKwargs.HistoryUID
	deleteHistory(t, m, conf, uid)
	settle(t, m)
	invoke(t, m, protocol.ChatRequest{Message: "Do you remember my dog's name?"})
	if got := contentOf(lastChat(t, llm)); strings.Contains(got, "Biscuit") {
		t.Errorf("a deleted history was recalled:\n%s", got)
	}
}

// deleteHistory deletes a history the way the web client does.
func deleteHistory(t *testing.T, m *app.Main, conf, uid string) {
	t.Helper()
	c := dialGreeted(t, m.Addr())
	if conf != koeConf(t) {
		t.Fatalf("conf %q is not the default character's", conf)
	}
	got := c.request(msg{"type": "delete-history", "history_uid": uid}, "history-deleted")
	if ok, _ := got["success"].(bool); !ok {
		t.Fatalf("delete-history: %v", got)
	}
}

// TestRecallKeepsTheContextSmall is the design's context goal with recall
// on: with the window policy bounded, at turn 50 of a chat of about 200
// tokens a turn the request holds at most 15% of the whole history's
// tokens, and a fact told at turn 2 still reaches the model when asked.
func TestRecallKeepsTheContextSmall(t *testing.T) {
	tok := agent.NewTokenizer(fakellm.ModelID)
	topics := []string{"the garden", "a film", "the weather", "cooking", "a book", "music", "the office", "a hike", "the car", "a museum"}
	said := func(turn int, who string) string {
		topic := topics[turn%len(topics)]
		var b strings.Builder
		for i := 0; tok.Count(b.String()) < 95; i++ {
			fmt.Fprintf(&b, "%s thinks about %s on day %d, detail %d, and keeps going with small talk. ", who, topic, turn, i)
		}
		return strings.TrimSpace(b.String())
	}
	respond := func(r fakellm.Request) fakellm.Reply {
		if !r.Stream {
			return fakellm.Reply{Tokens: fakellm.Words("They chatted about everyday things.")}
		}
		return fakellm.Reply{Tokens: fakellm.Words(said(len(r.Messages), "Koe"))}
	}
	llm := startLLM(t, respond)
	cfg := testConfig(t, t.TempDir(), llm.URL())
	mem := &cfg.Character.Memory
	mem.Policy, mem.MaxMessages, mem.KeepRecent, mem.MaxSummaries = agent.PolicyWindow, 4, 2, 2
	mem.Recall, mem.RecallBudget = true, 500
	m := startKoe(t, cfg)

	full := 0
	uid := ""
	for turn := 1; turn < 50; turn++ {
		text := said(turn, "Human")
		if turn == 2 {
			text = "My sister Odessa moved to Reykjavik last spring. " + text
		}
		answer := invoke(t, m, protocol.ChatRequest{Message: text, HistoryUID: uid})
		uid = answer.AdditionalKwargs.HistoryUID
		full += tok.Count(text) + tok.Count(answer.Content)
		settle(t, m)
	}
	question := "Where does my sister Odessa live now?"
	invoke(t, m, protocol.ChatRequest{Message: question, HistoryUID: uid})
	req := lastChat(t, llm)
	if got := contentOf(req); !strings.Contains(got, "Reykjavik") {
		t.Fatalf("the fact of turn 2 did not reach the model at turn 50:\n%s", got)
	}
	// What the request holds of the conversation: the summaries, the
	// earlier turns, the memories and the question; not the system
	// prompt's own text or the persona, which every request carries.
	sent := 0
	for i, msg := range req.Messages {
		text := msg.Content
		if i == 0 {
			_, sums, _ := strings.Cut(text, "Summaries of the earlier conversation")
			text = sums
		}
		sent += tok.Count(strings.Replace(text, cfg.Character.Persona, "", 1))
	}
	share := float64(sent) / float64(full)
	t.Logf("turn 50: %d of %d history tokens sent (%.1f%%)", sent, full, 100*share)
	if share > 0.15 {
		t.Errorf("the request holds %.1f%% of the history's %d tokens, want at most 15%%", 100*share, full)
	}
}

// TestRecallWithEmbeddings: with an embeddings endpoint configured, the
// messages are embedded through it as they are indexed and the question
// too, and the vector ranking takes part; the endpoint going down leaves
// recall working by keywords.
func TestRecallWithEmbeddings(t *testing.T) {
	llm := startLLM(t, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words("Noted.")}))
	cfg := testConfig(t, t.TempDir(), llm.URL())
	cfg.Embeddings.BaseURL, cfg.Embeddings.Model = llm.URL(), "fake-embed"
	m := startKoe(t, cfg)
	invoke(t, m, protocol.ChatRequest{Message: "My dog is called Biscuit and he loves the beach."})
	settle(t, m)
	embedded := false
	for _, r := range llm.EmbeddingRequests() {
		embedded = embedded || slices.Contains(r.Input, "My dog is called Biscuit and he loves the beach.")
	}
	if !embedded {
		t.Fatalf("the message was not embedded: %+v", llm.EmbeddingRequests())
	}
	var got struct {
		Vectors  bool   `json:"vectors"`
		Block    string `json:"block"`
		Indexed  int    `json:"indexed"`
		Memories []struct {
			Text string `json:"text"`
		} `json:"memories"`
	}
	url := "http://" + m.Addr() + "/api/characters/" + koeConf(t) + "/memories?q=" + neturl.QueryEscape("what is my dog called?")
	if code := getJSON(t, url, &got); code != 200 || !got.Vectors || !strings.Contains(got.Block, "Biscuit") {
		t.Fatalf("recall with vectors: %d %+v", code, got)
	}

	llm.SetEmbeddings(func(fakellm.EmbeddingRequest) fakellm.EmbeddingReply { return fakellm.EmbeddingReply{Status: 503} })
	if code := getJSON(t, url, &got); code != 200 || got.Vectors || !strings.Contains(got.Block, "Biscuit") {
		t.Fatalf("recall with the endpoint down: %d %+v", code, got)
	}
}
