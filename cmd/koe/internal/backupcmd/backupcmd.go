// Package backupcmd is `koe backup`: a consistent copy of koe.db, taken
// while koe runs or from a stopped data directory.
//
// A running koe holds koe.db's lock, so no other process can open the
// file: the copy is then made by koe itself, in one read transaction
// beside its running turns, and fetched from its admin endpoint
// (GET /api/admin/backup, from this machine only, with the token). A
// stopped data directory's koe.db is copied directly. Either way the copy
// goes to a temporary file beside -o, is synced and verified (bbolt's
// consistency check, opened read-only), and only then renamed to -o: -o
// is either the previous file or a whole, checked copy, never half of
// one.
package backupcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"koe/bolt"
	"koe/config"
	"koe/internal/quote"
	"koe/server"
)

// DatabaseFile is koe.db's name in the data directory (app's).
const DatabaseFile = "koe.db"

const usage = "usage: koe backup -o FILE [-config conf.yaml] [-data DIR] [-url http://127.0.0.1:12393]"

// Main runs `koe backup`; it returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	flags := flag.NewFlagSet("koe backup", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprintln(stderr, usage)
		flags.PrintDefaults()
	}
	configPath := flags.String("config", "conf.yaml", "YAML configuration file")
	out := flags.String("o", "", "the file to write the copy of koe.db to (replaced only by a whole, verified copy)")
	dataDir := flags.String("data", "", "data directory holding koe.db (default from config)")
	url := flags.String("url", "", "ask the koe at this address for the copy, e.g. http://127.0.0.1:12393 "+
		"(default: copy a stopped data directory's koe.db, or ask the koe of the configuration's server.host and server.port when it runs)")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "koe backup: unexpected argument %q\n%s\n", flags.Arg(0), usage)
		return 2
	}
	if *out == "" {
		fmt.Fprintf(stderr, "koe backup: give the file to write with -o FILE\n%s\n", usage)
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
		fmt.Fprintln(stderr, "koe backup:", err)
		return 1
	}
	if cfg.Store == config.StorePostgres && *url == "" {
		fmt.Fprintln(stderr, PostgresAdvice)
		return 1
	}
	opts := Options{
		Out:   *out,
		Path:  filepath.Join(cfg.DataDir, DatabaseFile),
		URL:   *url,
		Koe:   localURL(cfg.Server),
		Token: cfg.Server.AuthToken,
	}
	if cfg.Server.TLSCert != "" && *url == "" {
		if opts.Client, err = pinnedClient(cfg.Server.TLSCert); err != nil {
			fmt.Fprintln(stderr, "koe backup:", err)
			return 1
		}
	}
	res, err := Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "koe backup:", err)
		return 1
	}
	fmt.Fprintln(stdout, res)
	return 0
}

// PostgresAdvice is koe backup's answer for store: postgres, whose data
// is not in a file koe could copy.
const PostgresAdvice = `koe backup: this koe keeps its data in PostgreSQL (store: postgres), which koe backup does not copy.
Back it up with PostgreSQL's own tools, while koe runs (pg_dump reads one consistent snapshot):
  pg_dump -Fc -d "$KOE_DATABASE_URL" -f koe.dump
and restore into an empty database, with every koe stopped:
  pg_restore --no-owner -d "$KOE_DATABASE_URL" koe.dump
See Backups in docs/operations.md.`

// localURL is the address of the koe cfg describes, as this machine
// reaches it: a wildcard address is reached on loopback.
func localURL(cfg server.Config) string {
	host := cfg.Host
	if ip, err := netip.ParseAddr(host); host == "" || err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http://"
	if cfg.TLSCert != "" {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, strconv.Itoa(cfg.Port))
}

// Options configures Run.
type Options struct {
	Out  string // the file to write
	Path string // koe.db, copied directly when no koe has it open
	// URL, when set, is the koe to ask for the copy, whatever Path is.
	URL string
	// Koe is the koe to ask when Path is locked (koe runs on it).
	Koe   string
	Token string // server.auth_token
	// Client makes the request; nil means one without a timeout (a large
	// copy takes its time; ctx ends it).
	Client *http.Client
}

// Result is what a backup wrote.
type Result struct {
	Out     string
	From    string // "the running koe at URL" or the file copied
	Bytes   int64
	Elapsed time.Duration
	bolt.BackupContents
}

func (r Result) String() string {
	return fmt.Sprintf("backed up %s to %s: %d histories, %d records, %s, verified, in %s",
		r.From, r.Out, r.Histories, r.Records, quote.Bytes(r.Bytes), r.Elapsed.Round(time.Millisecond))
}

// Run makes the backup opts describes.
func Run(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	res := Result{Out: opts.Out}
	dir := filepath.Dir(opts.Out)
	if fi, err := os.Stat(dir); err != nil {
		return res, fmt.Errorf("the directory of -o %s: %w", opts.Out, err)
	} else if !fi.IsDir() {
		return res, fmt.Errorf("-o %s: %s is not a directory", opts.Out, dir)
	}
	if fi, err := os.Stat(opts.Out); err == nil && fi.IsDir() {
		return res, fmt.Errorf("-o %s is a directory: give a file name", opts.Out)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(opts.Out)+".tmp-*")
	if err != nil {
		return res, fmt.Errorf("create the backup's temporary file beside %s: %w", opts.Out, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()

	switch {
	case opts.URL != "":
		res.From = "the koe at " + opts.URL
		res.Bytes, err = fetch(ctx, opts, opts.URL, tmp)
	default:
		res.From = opts.Path
		res.Bytes, err = bolt.BackupFile(ctx, opts.Path, tmp)
		if errors.Is(err, bolt.ErrLocked) {
			// koe runs on the file: it makes the copy.
			res.From = "the running koe at " + opts.Koe
			if err := rewind(tmp); err != nil {
				return res, err
			}
			res.Bytes, err = fetch(ctx, opts, opts.Koe, tmp)
		} else if errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("no database to back up: %w (is -data, or data_dir in the configuration, koe's data directory?)", err)
		}
	}
	if err != nil {
		return res, err
	}
	if err := tmp.Sync(); err != nil {
		return res, fmt.Errorf("sync the backup: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return res, fmt.Errorf("close the backup: %w", err)
	}
	res.BackupContents, err = bolt.VerifyBackup(ctx, tmp.Name())
	if err != nil {
		return res, fmt.Errorf("the copy failed its check, and %s was left as it was: %w", opts.Out, err)
	}
	if err := os.Rename(tmp.Name(), opts.Out); err != nil {
		return res, fmt.Errorf("put the backup in place: %w", err)
	}
	done = true
	// The rename is durable once the directory is synced.
	if err := syncDir(dir); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// rewind empties f for a second attempt.
func rewind(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("empty the backup's temporary file: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("empty the backup's temporary file: %w", err)
	}
	return nil
}

// fetch asks the koe at base for its copy of koe.db and writes it to w.
func fetch(ctx context.Context, opts Options, base string, w io.Writer) (int64, error) {
	url := strings.TrimRight(base, "/") + server.BackupRoute
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("ask koe for the backup: %w", err)
	}
	if opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+opts.Token)
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{}
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("koe.db is locked by a running koe, and that koe did not answer at %s: %w "+
			"(give its address with -url, or stop it and back up the data directory)", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("the koe at %s refused the backup: %s: %s", base, resp.Status, refusal(resp.Body))
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("the copy from %s broke off after %d bytes: %w", base, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("the copy from %s broke off after %d of %d bytes", base, n, resp.ContentLength)
	}
	return n, nil
}

// refusal reads the error koe answered with.
func refusal(body io.Reader) string {
	data, _ := io.ReadAll(io.LimitReader(body, 4<<10))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return e.Error
	}
	return strings.TrimSpace(string(data))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
