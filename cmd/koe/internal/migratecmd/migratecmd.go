// Package migratecmd is `koe migrate`: it copies everything a bbolt data
// directory's koe.db holds (histories with their records, images and
// summaries, prompts, recall data, knowledge documents and chunks) into a
// PostgreSQL store.
//
// koe.db is opened read-only, beside no running koe. The PostgreSQL store
// must be empty unless -resume is given: then whatever it already holds
// (a history or document of the same ids, a prompt, a vector model) is
// left alone and only the rest is copied. Each history is copied whole in
// one transaction, so a migration that stops half-way leaves whole
// histories, and `koe migrate -resume` finishes it.
package migratecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"koe/bolt"
	"koe/config"
	"koe/history"
	"koe/postgres"
)

// DatabaseFile is koe.db's name in the data directory (app's).
const DatabaseFile = "koe.db"

const usage = "usage: koe migrate [-config conf.yaml] [-data DIR] [-dsn DSN] [-resume] [-lock-wait 2s] [-copy-timeout 5m]"

// DefaultCopyTimeout is Options.CopyTimeout's default: a history with
// many pictures is a large transaction.
const DefaultCopyTimeout = 5 * time.Minute

// Main runs `koe migrate`; it returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	flags := flag.NewFlagSet("koe migrate", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprintln(stderr, usage)
		flags.PrintDefaults()
	}
	configPath := flags.String("config", "conf.yaml", "YAML configuration file")
	dataDir := flags.String("data", "", "data directory holding koe.db (default from config)")
	dsn := flags.String("dsn", "", "PostgreSQL connection string (default: store_dsn, or env "+config.EnvDatabaseURL+")")
	resume := flags.Bool("resume", false, "copy into a store that is not empty: skip histories, documents and prompts already there")
	lockWait := flags.Duration("lock-wait", 2*time.Second, "how long to wait for koe.db's lock")
	copyTimeout := flags.Duration("copy-timeout", DefaultCopyTimeout, "limit on copying one history, or one character's prompts and documents")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "koe migrate: unexpected argument %q\n%s\n", flags.Arg(0), usage)
		return 2
	}
	explicit := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	cfg, err := config.Load(*configPath, explicit["config"], getenv, func(c *config.Config) {
		if explicit["data"] {
			c.DataDir = *dataDir
		}
		if explicit["dsn"] {
			c.StoreDSN = *dsn
		}
	})
	if err != nil {
		fmt.Fprintln(stderr, "koe migrate:", err)
		return 1
	}
	opts := Options{
		Path:        filepath.Join(cfg.DataDir, DatabaseFile),
		DSN:         cfg.StoreDSN,
		Resume:      *resume,
		LockWait:    *lockWait,
		Timeout:     cfg.StoreTimeout,
		CopyTimeout: *copyTimeout,
		Progress:    stdout,
	}
	st, err := Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "koe migrate:", err)
		return 1
	}
	fmt.Fprintln(stdout, st)
	return 0
}

// Options configures Run.
type Options struct {
	Path     string // koe.db
	DSN      string // the PostgreSQL store
	Resume   bool   // copy into a store that is not empty (see the package doc)
	LockWait time.Duration
	// Timeout bounds connecting (store_timeout); 0 means
	// history.DefaultTimeout.
	Timeout time.Duration
	// CopyTimeout bounds the copy of one history (its pictures
	// included), or of one character's prompts and documents; 0 means
	// DefaultCopyTimeout.
	CopyTimeout time.Duration
	// Progress receives a line every ProgressEvery histories (nil: none).
	Progress      io.Writer
	ProgressEvery int // 0 means 100
}

// Stats is what a migration copied. Skipped histories and documents were
// already in the PostgreSQL store.
type Stats struct {
	Histories, Skipped            int
	Records, Images, Summaries    int
	Recall, Forgotten, Marks      int
	Prompts, Models, Docs, Chunks int
	SkippedDocs                   int
	Bytes                         int64 // records, images, summaries, recall, texts and chunks
	Elapsed                       time.Duration
}

func (s Stats) String() string {
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Records) / s.Elapsed.Seconds()
	}
	return fmt.Sprintf("migrated %d histories (%d skipped: already there), %d records, %d images, %d summaries, "+
		"%d recall entries (%d forgotten, %d marks), %d prompts, %d vector models, %d documents (%d skipped) with %d chunks; "+
		"%s in %s (%.0f records/s)",
		s.Histories, s.Skipped, s.Records, s.Images, s.Summaries, s.Recall, s.Forgotten, s.Marks,
		s.Prompts, s.Models, s.Docs, s.SkippedDocs, s.Chunks, formatBytes(s.Bytes), s.Elapsed.Round(time.Millisecond), rate)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// Run copies the bbolt database opts.Path into the PostgreSQL store
// opts.DSN.
func Run(ctx context.Context, opts Options) (Stats, error) {
	var st Stats
	start := time.Now()
	if strings.TrimSpace(opts.DSN) == "" {
		return st, fmt.Errorf("no PostgreSQL store to copy into: give -dsn, store_dsn or %s", config.EnvDatabaseURL)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = history.DefaultTimeout
	}
	if opts.CopyTimeout <= 0 {
		opts.CopyTimeout = DefaultCopyTimeout
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = 100
	}
	src, err := bolt.OpenReadOnly(opts.Path, opts.LockWait)
	if errors.Is(err, bolt.ErrLocked) {
		return st, fmt.Errorf("%w: stop koe first (it keeps %s open), then migrate", err, opts.Path)
	}
	if err != nil {
		return st, err
	}
	defer src.Close()
	dst, err := openTarget(ctx, opts)
	if err != nil {
		return st, err
	}
	defer dst.Close()

	// The characters' data first: read whole (prompts and documents are
	// small beside histories), so that a conflict of vector models stops
	// the migration before it writes anything.
	var confs []*history.ConfExport
	if err := src.ExportConfs(ctx, func(c *history.ConfExport) error { confs = append(confs, c); return nil }); err != nil {
		return st, err
	}
	if err := checkModels(ctx, dst, confs); err != nil {
		return st, err
	}
	err = src.ExportHistories(ctx, func(h *history.HistoryExport) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		hctx, cancel := context.WithTimeout(ctx, opts.CopyTimeout)
		ok, err := dst.ImportHistory(hctx, h)
		cancel()
		if err != nil {
			return err
		}
		if !ok {
			st.Skipped++
		} else {
			st.add(h)
		}
		if n := st.Histories + st.Skipped; opts.Progress != nil && n%opts.ProgressEvery == 0 {
			fmt.Fprintf(opts.Progress, "%d histories (%d records) in %s\n", n, st.Records, time.Since(start).Round(time.Millisecond))
		}
		return nil
	})
	if err != nil {
		st.Elapsed = time.Since(start)
		return st, fmt.Errorf("%w (at least %d histories were copied, each whole; run again with -resume to finish)", err, st.Histories)
	}
	for _, c := range confs {
		cctx, cancel := context.WithTimeout(ctx, opts.CopyTimeout)
		n, err := dst.ImportConf(cctx, c)
		cancel()
		st.Prompts += n.Prompts
		st.Docs += n.Docs
		st.SkippedDocs += len(c.Docs) - n.Docs
		st.Chunks += n.Chunks
		if n.Model {
			st.Models++
		}
		for _, d := range c.Docs {
			st.Bytes += int64(len(d.Meta) + len(d.Text))
			for _, ch := range d.Chunks {
				st.Bytes += int64(len(ch.Body) + len(ch.Vector))
			}
		}
		if err != nil {
			st.Elapsed = time.Since(start)
			return st, fmt.Errorf("%w (every history is copied; run again with -resume to finish)", err)
		}
	}
	st.Elapsed = time.Since(start)
	return st, nil
}

// openTarget connects to the PostgreSQL store and checks that it is
// empty, or that opts.Resume allows it not to be.
func openTarget(ctx context.Context, opts Options) (*postgres.Store, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	dst, err := postgres.Open(ctx, opts.DSN, postgres.Options{Timeout: opts.Timeout})
	if err != nil {
		return nil, err
	}
	have, err := dst.Contents(ctx)
	if err == nil && !have.Empty() && !opts.Resume {
		err = fmt.Errorf("the PostgreSQL store already holds %d histories, %d documents and %d prompts: "+
			"migrate copies into an empty store; give -resume to add only what is missing "+
			"(after an interrupted migration, or to merge), leaving what is there as it is", have.Histories, have.Docs, have.Prompts)
	}
	if err != nil {
		_ = dst.Close()
		return nil, err
	}
	return dst, nil
}

// modelReader is what checkModels asks of the PostgreSQL store.
type modelReader interface {
	RecallVectorModel(ctx context.Context, conf string) (string, error)
}

// checkModels refuses to put one character's recall vectors beside
// vectors of another embedding model: recall would compare them.
func checkModels(ctx context.Context, dst modelReader, confs []*history.ConfExport) error {
	for _, c := range confs {
		if c.VectorModel == "" {
			continue
		}
		have, err := dst.RecallVectorModel(ctx, c.Conf)
		if err != nil {
			return err
		}
		if have != "" && have != c.VectorModel {
			return fmt.Errorf("character %q: its recall vectors in PostgreSQL were made by %q, those in koe.db by %q; "+
				"mixed, recall would compare vectors of two models: nothing was copied", c.Conf, have, c.VectorModel)
		}
	}
	return nil
}

// add counts a copied history.
func (st *Stats) add(h *history.HistoryExport) {
	st.Histories++
	st.Records += len(h.Records)
	st.Images += len(h.Images)
	st.Summaries += len(h.Summaries)
	st.Recall += len(h.Recall)
	st.Forgotten += len(h.Forgotten)
	if h.Mark != nil {
		st.Marks++
	}
	for _, r := range h.Records {
		st.Bytes += int64(len(r.Body))
	}
	for _, i := range h.Images {
		st.Bytes += int64(len(i.Data))
	}
	for _, s := range h.Summaries {
		st.Bytes += int64(len(s.Body))
	}
	for _, r := range h.Recall {
		st.Bytes += int64(len(r.Body) + len(r.Vector))
	}
}
