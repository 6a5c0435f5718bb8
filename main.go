// Command koe is a real-time voice conversation server speaking the
// Open-LLM-VTuber WebSocket protocol.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"koe/app"
	"koe/config"
)

func main() {
	if err := run(); err != nil {
		slog.Error("koe failed", "err", err)
		os.Exit(1)
	}
}

func run() error {
	configPath := flag.String("config", "conf.yaml", "YAML configuration file (missing = documented defaults)")
	host := flag.String("host", "", "address to listen on (default from config: 127.0.0.1)")
	port := flag.Int("port", 0, "port to listen on (default from config: 12393)")
	dataDir := flag.String("data", "", "data directory holding koe.db (default from config: data)")
	flag.Parse()

	explicit := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	cfg, err := config.Load(*configPath, explicit["config"], os.Getenv)
	if err != nil {
		return err
	}
	if explicit["host"] {
		cfg.Server.Host = *host
	}
	if explicit["port"] {
		cfg.Server.Port = *port
	}
	if explicit["data"] {
		cfg.DataDir = *dataDir
	}
	level, err := config.ParseLogLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)

	m := &app.Main{Config: cfg, Logger: logger}
	if err := m.Open(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-m.Done():
		_ = m.Close()
		return fmt.Errorf("server stopped: %w", err)
	}
	return m.Close()
}
