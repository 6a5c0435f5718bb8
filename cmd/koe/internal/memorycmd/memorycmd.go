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

// evalUsage is `koe eval locomo`'s synopsis.
const evalUsage = "usage: koe eval locomo -data FILE [-budget 500,1000,2000,4000] [-conversations N] [-loo] [-embeddings URL -embeddings-model NAME]"

// Eval runs `koe eval locomo`; it returns the exit code. getenv gives
// the embeddings endpoint's key (KOE_EMBEDDINGS_API_KEY), as for koe.
func Eval(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] != "locomo" {
		fmt.Fprintln(stderr, evalUsage)
		return 2
	}
	flags := flag.NewFlagSet("koe eval locomo", flag.ContinueOnError)
	flags.SetOutput(stderr)
	data := flags.String("data", "", "LoCoMo JSON file (a list of conversations with their questions)")
	budgets := flags.String("budget", "500,1000,2000,4000", "memories block sizes to try, in tokens, comma-separated")
	limit := flags.Int("conversations", 0, "use only the first N conversations (0: all)")
	model := flags.String("model", "", "count tokens as this model does (default: o200k_base)")
	loo := flags.Bool("loo", false, "leave one conversation out: choose the ranking's weights on the others, report the one left out, for each in turn")
	embURL := flags.String("embeddings", "", "an OpenAI-compatible embeddings endpoint (base URL, e.g. http://127.0.0.1:11434/v1): rank by keywords and vectors, as koe with embeddings.base_url does")
	embModel := flags.String("embeddings-model", "", "the embedding model to ask -embeddings for (required with it)")
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
	run := LoCoMoRun{Path: *data, Budgets: bs, Conversations: *limit, Model: *model, LeaveOneOut: *loo, Progress: stderr}
	if *embURL != "" {
		if *embModel == "" {
			fmt.Fprintln(stderr, "koe eval locomo: -embeddings needs -embeddings-model NAME (the model the endpoint serves)")
			return 2
		}
		cfg := llm.EmbeddingsConfig{BaseURL: *embURL, Model: *embModel}
		cfg.ApplyEnv(getenv)
		if err := cfg.Validate(); err != nil {
			fmt.Fprintln(stderr, "koe eval locomo: -embeddings:", err)
			return 2
		}
		run.Embedder = llm.NewEmbedder(cfg, nil)
	}
	if err := run.Run(ctx, stdout); err != nil {
		fmt.Fprintln(stderr, "koe eval locomo:", err)
		return 1
	}
	return 0
}

// LoCoMoRun is one `koe eval locomo`.
type LoCoMoRun struct {
	Path          string
	Budgets       []int
	Conversations int    // the first N only (0: all)
	Model         string // the tokenizer's
	LeaveOneOut   bool
	Embedder      recall.Embedder // nil: keywords only
	// Progress gets the leave-one-out search's progress lines (stderr).
	Progress io.Writer
}

// Run replays the file's conversations into a throw-away store, measures
// recall at each budget, and writes the report: with the default
// ranking, or, for LeaveOneOut, the search of locomo.LeaveOneOut.
func (r LoCoMoRun) Run(ctx context.Context, w io.Writer) error {
	samples, err := locomo.Load(r.Path)
	if err != nil {
		return err
	}
	if r.Conversations > 0 && r.Conversations < len(samples) {
		samples = samples[:r.Conversations]
	}
	dir, err := os.MkdirTemp("", "koe-locomo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tok := agent.NewTokenizer(r.Model)
	rep, err := locomo.Replay(ctx, samples, locomo.Options{Dir: dir, Count: tok.Count, Embedder: r.Embedder})
	if err != nil {
		return err
	}
	defer rep.Close()
	if r.Embedder != nil {
		fmt.Fprintf(w, "Ranking by keywords and %s's vectors, fused.\n", r.Embedder.Model())
	}
	if r.LeaveOneOut {
		l, err := locomo.LeaveOneOut(ctx, rep, locomo.LOOOptions{Budgets: r.Budgets, Grid: locomo.DefaultGrid(), Start: recall.DefaultRanking, Progress: r.Progress})
		if err != nil {
			return err
		}
		l.Write(w)
		return nil
	}
	res, err := rep.Report(ctx, r.Budgets, nil)
	if err != nil {
		return err
	}
	res.Write(w)
	return nil
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
