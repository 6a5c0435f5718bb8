package client_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"koe/app"
	"koe/client"
	"koe/config"
	"koe/protocol"
	"koe/testkit/fakellm"
)

// A turn streamed as it is written, then the same history continued with
// Invoke, then read back.
func Example() {
	baseURL, stop := startExampleKoe("Hello! How can I help?", "You're welcome.")
	defer stop()
	ctx := context.Background()

	c, err := client.New(baseURL) // client.WithToken(...) when koe has an auth_token
	if err != nil {
		log.Fatal(err)
	}
	var confUID, historyUID string
	for ev, err := range c.Stream(ctx, protocol.ChatRequest{Message: "Hi!"}) {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Type {
		case protocol.EventToken:
			fmt.Print(ev.Token)
		case protocol.EventMessage:
			if ev.Message.Type == protocol.MessageHuman {
				// A new history: this is where the turn is stored.
				confUID = ev.Message.AdditionalKwargs.ConfUID
				historyUID = ev.Message.AdditionalKwargs.HistoryUID
			}
		case protocol.EventError:
			fmt.Println("koe:", ev.Error)
		}
	}
	fmt.Println()

	answer, err := c.Invoke(ctx, protocol.ChatRequest{Message: "Thanks!", HistoryUID: historyUID})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer.Content)

	history, err := c.History(ctx, confUID, historyUID, 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range history.Messages {
		fmt.Printf("%s: %s\n", m.Type, m.Content)
	}
	// Output:
	// Hello! How can I help?
	// You're welcome.
	// human: Hi!
	// ai: Hello! How can I help?
	// human: Thanks!
	// ai: You're welcome.
}

// startExampleKoe runs a koe whose LLM gives the answers in order, with its
// data in a temporary directory, and returns its URL and what stops it.
func startExampleKoe(answers ...string) (string, func()) {
	var replies []fakellm.Reply
	for _, a := range answers {
		replies = append(replies, fakellm.Reply{Tokens: fakellm.Words(a)})
	}
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Script(replies...))
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "koe-client-example")
	if err != nil {
		log.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.CharactersDir = filepath.Join(dir, "characters")
	cfg.Server.Port = 0
	cfg.Server.BackgroundsDir = filepath.Join(dir, "bg")
	cfg.Character.LLM.BaseURL = llm.URL()
	cfg.Character.LLM.Model = fakellm.ModelID
	m := &app.Main{Config: cfg, Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }}
	if err := m.Open(); err != nil {
		log.Fatal(err)
	}
	return "http://" + m.Addr(), func() {
		_ = m.Close()
		_ = llm.Close()
		_ = os.RemoveAll(dir)
	}
}
