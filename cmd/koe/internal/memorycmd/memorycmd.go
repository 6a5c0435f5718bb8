// Package memorycmd is koe's commands for its long-term memory:
// `koe memory rebuild` builds the characters' recall indexes again from
// their histories, and `koe eval locomo` measures recall on the LoCoMo
// conversations.
package memorycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"koe/agent"
	"koe/bolt"
	"koe/config"
	"koe/llm"
	"koe/postgres"
	"koe/recall"
	"koe/recall/locomo"
)

// DatabaseFile is koe.db's name in the data directory (app's).
const DatabaseFile = "koe.db"

// Memory runs `koe memory SUBCOMMAND`; it returns the exit code.
func Memory(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] != "rebuild" {
		fmt.Fprintln(stderr, "usage: koe memory rebuild [-config conf.yaml] [-data DIR] [-character CONF_UID]")
		return 2
	}
	flags := flag.NewFlagSet("koe memory rebuild", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "conf.yaml", "YAML configuration file")
	dataDir := flags.String("data", "", "data directory holding koe.db (default from config)")
	only := flags.String("character", "", "rebuild only this character (conf_uid); default all")
	if err := flags.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	explicit := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	cfg, err := config.Load(*configPath, explicit["config"], getenv, func(c *config.Config) {
		if explicit["data"] {
			c.DataDir = *dataDir
		}
	})
	if err != nil {
		fmt.Fprintln(stderr, "koe memory rebuild:", err)
		return 1
	}
	if err := rebuild(ctx, cfg, *only, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "koe memory rebuild:", err)
		return 1
	}
	return 0
}

// rebuildStore is what a rebuild reads and writes.
type rebuildStore interface {
	recall.Store
	Close() error
}

// openStore opens the configured store: koe.db in the data directory, or
// PostgreSQL (store: postgres).
func openStore(ctx context.Context, cfg config.Config) (rebuildStore, error) {
	if cfg.Store == config.StorePostgres {
		ctx, cancel := context.WithTimeout(ctx, cfg.StoreTimeout)
		defer cancel()
		return postgres.Open(ctx, cfg.StoreDSN, postgres.Options{Timeout: cfg.StoreTimeout})
	}
	path := filepath.Join(cfg.DataDir, DatabaseFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no database at %s: %w", path, err)
	}
	store, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			return nil, fmt.Errorf("%w: stop koe first, then rebuild", err)
		}
		return nil, err
	}
	return store, nil
}

func rebuild(ctx context.Context, cfg config.Config, only string, stdout, stderr io.Writer) error {
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	tok := agent.NewTokenizer(cfg.Character.LLM.Model)
	opts := recall.Options{Store: store, Count: tok.Count,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if cfg.Embeddings.Enabled() {
		// The vectors are made again too, with the configured model.
		opts.Embedder = llm.NewEmbedder(cfg.Embeddings, nil)
	}
	svc := recall.New(opts)
	defer svc.Close()
	confs := []string{only}
	if only == "" {
		if confs, err = store.Confs(ctx); err != nil {
			return err
		}
	}
	for _, conf := range confs {
		start := time.Now()
		if err := svc.Rebuild(ctx, conf); err != nil {
			return fmt.Errorf("character %s: %w", conf, err)
		}
		st, err := svc.Stats(ctx, conf)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %d memories from %d histories in %s\n", conf, st.Memories, st.Histories, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// Eval runs `koe eval locomo`; it returns the exit code.
func Eval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "locomo" {
		fmt.Fprintln(stderr, "usage: koe eval locomo -data FILE [-budget 500,1000,2000,4000] [-conversations N]")
		return 2
	}
	flags := flag.NewFlagSet("koe eval locomo", flag.ContinueOnError)
	flags.SetOutput(stderr)
	data := flags.String("data", "", "LoCoMo JSON file (a list of conversations with their questions)")
	budgets := flags.String("budget", "500,1000,2000,4000", "memories block sizes to try, in tokens, comma-separated")
	limit := flags.Int("conversations", 0, "use only the first N conversations (0: all)")
	model := flags.String("model", "", "count tokens as this model does (default: o200k_base)")
	if err := flags.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *data == "" {
		fmt.Fprintln(stderr, "koe eval locomo: -data FILE is required")
		return 2
	}
	bs, err := parseBudgets(*budgets)
	if err != nil {
		fmt.Fprintln(stderr, "koe eval locomo:", err)
		return 2
	}
	rep, err := RunLoCoMo(ctx, *data, bs, *limit, *model)
	if err != nil {
		fmt.Fprintln(stderr, "koe eval locomo:", err)
		return 1
	}
	rep.Write(stdout)
	return 0
}

// RunLoCoMo replays the file's conversations into a throw-away store and
// measures recall at each budget.
func RunLoCoMo(ctx context.Context, path string, budgets []int, conversations int, model string) (*locomo.Report, error) {
	samples, err := locomo.Load(path)
	if err != nil {
		return nil, err
	}
	if conversations > 0 && conversations < len(samples) {
		samples = samples[:conversations]
	}
	dir, err := os.MkdirTemp("", "koe-locomo-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tok := agent.NewTokenizer(model)
	return locomo.Run(ctx, samples, locomo.Options{Budgets: budgets, Dir: dir, Count: tok.Count})
}

func parseBudgets(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < agent.MinRecallBudget || n > agent.MaxRecallBudget {
			return nil, fmt.Errorf("-budget %q: each must be a number of tokens from %d to %d", f, agent.MinRecallBudget, agent.MaxRecallBudget)
		}
		out = append(out, n)
	}
	return out, nil
}
