package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"koe/internal/pprofserve"
	"koe/testkit/loadrun/relay"
)

// relayServeFlag, as the first argument, makes this binary the floor that
// -baseline measures: a process of its own, so that /proc reports its CPU
// and memory exactly as it reports koe's.
const relayServeFlag = "-relay-serve"

// relayServe runs the bare relay on 127.0.0.1:-port until SIGTERM or
// SIGINT. It finds the LLM where koe would: OPENAI_BASE_URL, KOE_LLM_MODEL
// and OPENAI_API_KEY, which loadrun.Launch sets.
func relayServe(args []string) error {
	fs := flag.NewFlagSet("koe-load "+relayServeFlag, flag.ContinueOnError)
	port := fs.Int("port", 0, "port to listen on, on 127.0.0.1")
	pprofAddr := fs.String("pprof", "", "serve Go's profiles on this loopback host:port (for -profile)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pprofAddr != "" {
		p, err := pprofserve.Start("-pprof", *pprofAddr, slog.Default(), nil)
		if err != nil {
			return err
		}
		defer p.Stop()
	}
	if *port < 1 || *port > 65535 {
		return fmt.Errorf("-port %d: want a port between 1 and 65535", *port)
	}
	base := os.Getenv("OPENAI_BASE_URL")
	if base == "" {
		return fmt.Errorf("OPENAI_BASE_URL is not set: %s is started by koe-load -baseline", relayServeFlag)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(stop)
	r, err := relay.Start(fmt.Sprintf("127.0.0.1:%d", *port), relay.Options{
		LLMBaseURL: base,
		Model:      os.Getenv("KOE_LLM_MODEL"),
		APIKey:     os.Getenv("OPENAI_API_KEY"),
	})
	if err != nil {
		return err
	}
	select {
	case <-stop:
		return r.Close()
	case err := <-r.Done():
		_ = r.Close()
		return fmt.Errorf("relay stopped: %w", err)
	}
}
