// Command koe is a real-time voice conversation server speaking the
// Open-LLM-VTuber WebSocket protocol. `koe chat` chats with a running koe
// from a terminal; `koe migrate` copies a data directory's koe.db into a
// PostgreSQL store; `koe backup` copies koe.db.
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
	"strings"
	"syscall"

	"koe/app"
	"koe/cmd/koe/internal/backupcmd"
	"koe/cmd/koe/internal/chatcli"
	"koe/cmd/koe/internal/memorycmd"
	"koe/cmd/koe/internal/migratecmd"
	"koe/config"
	"koe/internal/pprofserve"
	"koe/server"
)

func main() {
	os.Exit(dispatch(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Getenv))
}

// stdio is what a subcommand reads and writes (files: koe chat puts a
// terminal into raw mode).
type stdio struct {
	in, out *os.File
	err     io.Writer
}

// command is one of koe's subcommands.
type command struct {
	name, args, summary string
	// run gets the arguments after the name and returns the exit status.
	run func(args []string, std stdio, getenv func(string) string) int
}

// commands are koe's subcommands; without one, koe serves.
var commands = []command{
	{"chat", "[flags]", "chat with a running koe from a terminal", func(args []string, std stdio, getenv func(string) string) int {
		// A client: it takes Ctrl-C for itself, so it has no signal
		// context.
		return chatcli.Main(args, std.in, std.out, std.err, getenv)
	}},
	{"memory", "rebuild [flags]", "look after characters' long-term memory", withSignals(memorycmd.Memory)},
	{"eval", "locomo [flags]", "measure long-term recall on LoCoMo", withSignals(memorycmd.Eval)},
	{"migrate", "[flags]", "copy a data directory's koe.db into a PostgreSQL store", withSignals(migratecmd.Main)},
	{"backup", "-o FILE [flags]", "copy koe.db, of a running koe or a stopped data directory", withSignals(backupcmd.Main)},
}

// dispatch runs the subcommand args name, or the server when the first
// argument is none (a flag, or nothing).
func dispatch(args []string, std stdio, getenv func(string) string) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if args[0] == "help" {
			usage(std.out)
			return 0
		}
		for _, c := range commands {
			if c.name == args[0] {
				return c.run(args[1:], std, getenv)
			}
		}
		fmt.Fprintf(std.err, "koe: unknown subcommand %q\n\n", args[0])
		usage(std.err)
		return 2
	}
	ctx, stop := signalContext()
	err := run(ctx, args, std.err, getenv)
	stop()
	var usageErr usageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(std.err)
		usage(std.err)
	case errors.As(err, &usageErr):
		return 2 // the flag package has printed the problem and the usage
	default:
		slog.Error("koe failed", "err", err)
		return 1
	}
	return 0
}

// withSignals runs a subcommand in a context that SIGINT or SIGTERM ends.
func withSignals(run func(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int) func([]string, stdio, func(string) string) int {
	return func(args []string, std stdio, getenv func(string) string) int {
		ctx, stop := signalContext()
		defer stop()
		return run(ctx, args, std.out, std.err, getenv)
	}
}

// usage lists the subcommands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage:\n  koe [flags]                   serve (koe -h lists the flags)")
	for _, c := range commands {
		fmt.Fprintf(w, "  koe %-26s%s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	fmt.Fprintf(w, "  koe %-26s%s\n", "help", "this list")
	fmt.Fprintln(w, "\nkoe SUBCOMMAND -h describes a subcommand's flags.")
}

// signalContext ends at SIGINT or SIGTERM: koe then drains and shuts down
// gracefully (see run).
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
	// SIGHUP rereads the TLS certificate (see app.Main.Reload). Taken
	// from the start: its default action would end koe, and systemd's
	// ExecReload or a renewal hook may send it at any time.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// Every line names the instance: those logged while the file is read
	// by KOE_INSTANCE or the host name (the file is not read yet), the
	// rest by the configured name.
	level := new(slog.LevelVar)
	handler := slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	early := config.InstanceName(getenv(config.EnvInstance))
	logger := slog.New(handler).With(instanceAttr, early)
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
	if name := cfg.InstanceName(); name != early {
		logger = slog.New(handler).With(instanceAttr, name)
		slog.SetDefault(logger)
	}
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
	for {
		select {
		case <-ctx.Done():
			// Listened for before the drain says a word, so that a second
			// signal is never missed: it stops at once, storing what the
			// running turns' clients heard.
			again, stopAgain := signalContext()
			defer stopAgain()
			logger.Info("shutting down: draining first; a second SIGTERM or SIGINT stops at once", "drain_timeout", cfg.Server.DrainTimeout)
			m.Drain(again)
			return m.Close()
		case err := <-m.Done():
			_ = m.Close()
			return fmt.Errorf("server stopped: %w", err)
		case <-hup:
			_ = m.Reload() // logged; a failed reload keeps the old certificate
		}
	}
}

// instanceAttr is the attribute that names the instance on every log line.
const instanceAttr = "instance"

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
