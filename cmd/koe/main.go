// Command koe is a real-time voice conversation server speaking the
// Open-LLM-VTuber WebSocket protocol. `koe chat` chats with a running koe
// from a terminal; `koe migrate` copies a data directory's koe.db into a
// PostgreSQL store.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"koe/app"
	"koe/cmd/koe/internal/chatcli"
	"koe/cmd/koe/internal/memorycmd"
	"koe/cmd/koe/internal/migratecmd"
	"koe/config"
	"koe/internal/pprofserve"
	"koe/server"
)

func main() {
	// koe chat is a client: it takes Ctrl-C for itself, so it goes its
	// own way before the server's signal handling.
	if len(os.Args) > 1 && os.Args[1] == "chat" {
		os.Exit(chatcli.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	if len(os.Args) > 1 && (os.Args[1] == "memory" || os.Args[1] == "eval" || os.Args[1] == "migrate") {
		ctx, stop := signalContext()
		code := memorycmd.Memory
		switch os.Args[1] {
		case "migrate":
			code = migratecmd.Main
		case "eval":
			code = func(ctx context.Context, args []string, stdout, stderr io.Writer, _ func(string) string) int {
				return memorycmd.Eval(ctx, args, stdout, stderr)
			}
		}
		status := code(ctx, os.Args[2:], os.Stdout, os.Stderr, os.Getenv)
		stop()
		os.Exit(status)
	}
	ctx, stop := signalContext()
	err := run(ctx, os.Args[1:], os.Stderr, os.Getenv)
	stop()
	var usage usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		os.Exit(2) // the flag package has printed the problem and the usage
	default:
		slog.Error("koe failed", "err", err)
		os.Exit(1)
	}
}

// signalContext ends at SIGINT or SIGTERM: koe then shuts down gracefully.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// usageError is a command line the flag package refused.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// run is koe from the command line to its shutdown, which ctx starts.
func run(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	// One log format from the first line on: reading the configuration
	// logs too, so the handler goes in at info before it, and takes the
	// configured level once the file is read.
	level := new(slog.LevelVar)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(logger)

	cfg, cl, err := loadConfig(args, stderr, getenv)
	if err != nil {
		return err
	}
	configured, err := config.ParseLogLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	level.Set(configured)
	if os.Geteuid() == 0 {
		logger.Warn("koe runs as root, and needs none of root's power: run it as an unprivileged user (the python tool's code runs as tools.python.uid meanwhile)")
	}

	if cl.pprofAddr != "" {
		// The same Host check and token as koe's own port.
		p, err := pprofserve.Start("-pprof", cl.pprofAddr, logger, func(h http.Handler) http.Handler { return server.GuardHTTP(cfg.Server, h) })
		if err != nil {
			return err
		}
		defer p.Stop()
	}

	m := &app.Main{Config: cfg, Logger: logger, Getenv: getenv}
	if err := m.Open(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-m.Done():
		_ = m.Close()
		return fmt.Errorf("server stopped: %w", err)
	}
	return m.Close()
}

// commandLine holds the flags that are not configuration settings.
type commandLine struct {
	// pprofAddr serves net/http/pprof when set (loopback only).
	pprofAddr string
}

// loadConfig reads the flags and the configuration they name.
func loadConfig(args []string, stderr io.Writer, getenv func(string) string) (config.Config, commandLine, error) {
	flags := flag.NewFlagSet("koe", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "conf.yaml", "YAML configuration file (missing = documented defaults)")
	host := flags.String("host", "", "address to listen on (default from config: 127.0.0.1)")
	port := flags.Int("port", 0, "port to listen on (default from config: 12393)")
	dataDir := flags.String("data", "", "data directory holding koe.db (default from config: data)")
	var cl commandLine
	flags.StringVar(&cl.pprofAddr, "pprof", "", "serve Go's profiles (net/http/pprof) on this loopback host:port, e.g. 127.0.0.1:6060 (default off)")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config.Config{}, cl, err
		}
		return config.Config{}, cl, usageError{err}
	}
	if flags.NArg() > 0 {
		return config.Config{}, cl, fmt.Errorf("unexpected argument %q (settings go in the configuration file)", flags.Arg(0))
	}
	if cl.pprofAddr != "" {
		if err := pprofserve.Check("-pprof", cl.pprofAddr); err != nil {
			return config.Config{}, cl, err
		}
	}
	explicit := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { explicit[f.Name] = true })

	// Flags are applied before validation, so it judges the values koe
	// will run with (and a flag can stand in for a bad value in the file).
	cfg, err := config.Load(*configPath, explicit["config"], getenv, func(cfg *config.Config) {
		if explicit["host"] {
			cfg.Server.Host = *host
		}
		if explicit["port"] {
			cfg.Server.Port = *port
		}
		if explicit["data"] {
			cfg.DataDir = *dataDir
		}
	})
	return cfg, cl, err
}
