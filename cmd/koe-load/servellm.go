package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"koe/testkit/fakellm"
)

// -serve-llm runs the fake LLM that -koe starts koe against, on its own:
// point a koe deployed any way (systemd, compose, three instances behind
// nginx) at it, and koe-load -url measures that deployment with the same
// replies at the same speed as the tables in the docs, with no LLM's time
// in them. It answers chat completions (streamed at -tps) and speech (a
// tone), as OpenAI's API does.

// startFakeLLM starts the fake LLM on addr, answering every request with
// -reply at -tps. It keeps no request: it may run for days.
func startFakeLLM(addr string, o options) (*fakellm.Server, error) {
	interval := time.Duration(float64(time.Second) / o.tps)
	llm, err := fakellm.Start(addr, fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(o.reply), Interval: interval}))
	if err != nil {
		return nil, fmt.Errorf("-serve-llm: %w", err)
	}
	llm.SetRecording(false)
	return llm, nil
}

// serveLLM runs the fake LLM on o.serveLLM until ctx ends, telling out how
// to point koe at it.
func serveLLM(ctx context.Context, o options, out io.Writer) error {
	if o.tps <= 0 || o.tps > 100000 {
		return fmt.Errorf("-tps must be above 0 and at most 100000")
	}
	llm, err := startFakeLLM(o.serveLLM, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "fake LLM at %s, %d tokens at %.0f tokens/s per reply; point koe at it:\n", llm.URL(), len(fakellm.Words(o.reply)), o.tps)
	fmt.Fprintf(out, "  OPENAI_BASE_URL=%s KOE_LLM_MODEL=%s OPENAI_API_KEY=load koe ...\n", llm.URL(), fakellm.ModelID)
	fmt.Fprintf(out, "  (speech too: character.tts.engine: openai, character.tts.openai.base_url: %s)\n", llm.URL())
	if host, _, err := net.SplitHostPort(o.serveLLM); err == nil && !isLoopbackIP(host) {
		fmt.Fprintln(out, "  it answers anyone who reaches "+o.serveLLM+": stop it (Ctrl-C) when the run is over")
	}
	<-ctx.Done()
	return llm.Close()
}

// isLoopbackIP reports a literal loopback address or localhost.
func isLoopbackIP(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveLLMUntilSignal is -serve-llm from the command line: until SIGINT or
// SIGTERM.
func serveLLMUntilSignal(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveLLM(ctx, o, os.Stdout)
}
