package histories_test

import (
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"koe"
	"koe/agent"
	"koe/bolt"
	"koe/histories"
	"koe/protocol"
)

const conf = "mao"

type characters map[string]bool

func (c characters) Has(conf string) bool { return c[conf] }

type news struct {
	mu     sync.Mutex
	topics []string
}

func (n *news) Publish(_ context.Context, topic, payload string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.topics = append(n.topics, topic+" "+payload)
	return nil
}

// service is a Service over a real history store in a temporary
// directory, of one character, paging by 3.
func service(t *testing.T, opts histories.Options) (*histories.Service, *bolt.Store) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "koe.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	opts.Store, opts.Characters, opts.PageLimit = st, characters{conf: true}, 3
	return histories.New(opts), st
}

func kindOf(err error) koe.Kind {
	var e *koe.Error
	if !errors.As(err, &e) {
		return -1
	}
	return e.Kind
}

func TestPrompts(t *testing.T) {
	ctx := t.Context()
	var saved []string
	n := &news{}
	s, _ := service(t, histories.Options{Saved: func(c string) { saved = append(saved, c) }, News: n})
	p, err := s.Prompt(ctx, conf, koe.PromptSystem)
	if err != nil || !p.Default || p.Text != agent.DefaultSystemPrompt || p.Type != protocol.TypeSystemPrompt {
		t.Fatalf("the default system prompt: %+v, %v", p, err)
	}
	if p, _ := s.Prompt(ctx, conf, koe.PromptReminder); !p.Default || p.Text != "" || p.Type != protocol.TypeReminder {
		t.Errorf("the default reminder: %+v", p)
	}
	if _, err := s.Prompt(ctx, conf, "secret"); kindOf(err) != koe.NotFound || !strings.Contains(err.Error(), "prompts are named system or reminder") {
		t.Errorf("an unknown prompt: %v", err)
	}
	if _, err := s.SetPrompt(ctx, "nobody", koe.PromptSystem, "x"); kindOf(err) != koe.NotFound {
		t.Errorf("a prompt of an unknown character: %v", err)
	}
	p, err = s.SetPrompt(ctx, conf, koe.PromptSystem, "Be brief.")
	if err != nil || p.Default || p.Text != "Be brief." {
		t.Fatalf("saved: %+v, %v", p, err)
	}
	if !reflect.DeepEqual(saved, []string{conf}) || !reflect.DeepEqual(n.topics, []string{histories.NewsPrompts + " " + conf}) {
		t.Errorf("a saved prompt told the sessions %v and the other instances %v", saved, n.topics)
	}
	if p, _ := s.SetPrompt(ctx, conf, koe.PromptSystem, ""); !p.Default || p.Text != agent.DefaultSystemPrompt {
		t.Errorf(`"" does not restore the default: %+v`, p)
	}
	if _, err := s.SetPrompt(ctx, conf, koe.PromptSystem, strings.Repeat("x", koe.MaxPromptLen+1)); !errors.Is(err, koe.ErrInvalidRecord) {
		t.Errorf("an oversized prompt: %v", err)
	}
}

func TestHistories(t *testing.T) {
	ctx := t.Context()
	s, st := service(t, histories.Options{})
	if _, err := s.Histories(ctx, "nobody"); kindOf(err) != koe.NotFound {
		t.Errorf("the histories of no character: %v", err)
	}
	if list, err := s.Histories(ctx, conf); err != nil || list.Histories == nil || len(list.Histories) != 0 {
		t.Errorf("a character without histories: %+v, %v", list, err)
	}
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n fake"))
	err := st.CreateWith(ctx, conf, "h1",
		koe.Record{Role: koe.RoleHuman, Content: "what is 6*7?", Images: []koe.Image{{Source: "upload", MimeType: "image/png", Data: png}}},
		koe.Record{Role: koe.RoleToolCall, Content: "Let me see.", ToolCalls: []koe.ToolCall{{ID: "c1", Name: "calc", Arguments: `{"x":"6*7"}`}}},
		koe.Record{Role: koe.RoleTool, ToolCallID: "c1", Name: "calc", Content: "42"},
		koe.Record{Role: koe.RoleAI, Content: "Let me see. It is 42."},
		koe.Record{Role: koe.RoleHuman, Content: "thanks"},
	)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.Histories(ctx, conf)
	if err != nil || len(list.Histories) != 1 || list.Histories[0].UID != "h1" || list.Histories[0].LatestMessage.Content != "thanks" {
		t.Fatalf("list: %+v, %v", list, err)
	}

	chat, err := s.ChatHistory(ctx, conf, "h1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range chat.Messages {
		got = append(got, m.Type+": "+m.Content)
	}
	// Paged by 3: the newest three records, the tool call's words not
	// repeated in the answer.
	if want := []string{"tool: 42", "ai: Let me see. It is 42.", "human: thanks"}; !reflect.DeepEqual(got, want) || !chat.More {
		t.Errorf("chat history = %q (more %v), want %q", got, chat.More, want)
	}
	chat, _ = s.ChatHistory(ctx, conf, "h1", 0, 0)
	if len(chat.Messages) != 3 {
		t.Errorf("a page of 0 holds %d, want the page limit", len(chat.Messages))
	}
	chat, _ = s.ChatHistory(ctx, conf, "h1", chat.Messages[0].AdditionalKwargs.ID, 3)
	if len(chat.Messages) != 2 || chat.Messages[1].Type != protocol.MessageAI || len(chat.Messages[1].ToolCalls) != 1 ||
		string(chat.Messages[1].ToolCalls[0].Args) != `{"x":"6*7"}` {
		t.Fatalf("the older page: %+v", chat.Messages)
	}
	img := chat.Messages[0].AdditionalKwargs.Images
	if len(img) != 1 || !strings.HasPrefix(img[0].URL, "/api/histories/mao/h1/images/") {
		t.Fatalf("the human message's image: %+v", img)
	}
	ref := strings.TrimPrefix(img[0].URL, "/api/histories/mao/h1/images/")
	if mime, data, err := s.Image(ctx, conf, "h1", ref); err != nil || mime != "image/png" || !strings.HasPrefix(string(data), "\x89PNG") {
		t.Errorf("image: %q %q %v", mime, data, err)
	}
	if _, _, err := s.Image(ctx, conf, "h1", "99-0"); !errors.Is(err, koe.ErrNotFound) {
		t.Errorf("an unknown image: %v", err)
	}

	page, err := s.HistoryPage(ctx, conf, "h1", 0, 10)
	if err != nil || page.Type != protocol.TypeHistoryPage || len(page.Messages) != 2 || page.Messages[1].Content != "thanks" {
		t.Errorf("page: %+v, %v", page, err)
	}
	if _, err := s.HistoryPage(ctx, conf, "h9", 0, 10); !errors.Is(err, koe.ErrNotFound) {
		t.Errorf("an unknown history: %v", err)
	}
}

func TestSaid(t *testing.T) {
	for _, c := range []struct{ before, next, sep string }{
		{"", "Hello", ""}, {"Hi.", "Next", " "}, {"Hi. ", "Next", ""}, {"Hi.", " Next", ""}, {"Hi.", "", " "},
	} {
		if got := histories.Separator(c.before, c.next); got != c.sep {
			t.Errorf("Separator(%q, %q) = %q, want %q", c.before, c.next, got, c.sep)
		}
	}
	if got := histories.JoinSaid("Let me see.", "Still looking."); got != "Let me see. Still looking." {
		t.Errorf("JoinSaid = %q", got)
	}
	if got := histories.JoinSaid("Let me see.", ""); got != "Let me see." {
		t.Errorf("JoinSaid with nothing said = %q", got)
	}
	if got := histories.AfterSaid("Let me see. It is 42.", "Let me see."); got != "It is 42." {
		t.Errorf("AfterSaid = %q", got)
	}
	d := histories.Data(conf, "h1", []koe.Record{{Role: koe.RoleHuman, Content: "a"}, {Role: koe.RoleSystem, Content: "hidden"},
		{Role: koe.RoleAI, Content: "b"}, {Role: koe.RoleHuman, Content: "c"}}, 2)
	if len(d.Messages) != 2 || d.Messages[0].Content != "b" || !d.More {
		t.Errorf("history-data of the newest two: %+v", d)
	}
}
