package backupcmd

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe"
	"koe/bolt"
	"koe/client"
	"koe/protocol"
	"koe/server"
	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// files lists dir's entries by name.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A running koe with a token copies its koe.db for koe backup when the
// token comes along, and refuses it otherwise, leaving no file behind.
func TestBackupOfRunningKoe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const token = "backup-cmd-token-0123456789"
	llm := koetest.StartLLM(t, fakellm.Echo(time.Millisecond))
	data := t.TempDir()
	cfg := koetest.WithFakeSpeech(koetest.Config(t, data, llm.URL()), llm)
	cfg.Server.AuthToken = token
	m := koetest.StartKoe(t, cfg)
	c, err := client.New("http://"+m.Addr(), client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	for _, said := range []string{"first words", "second words"} {
		if _, err := c.Invoke(ctx, protocol.ChatRequest{Message: said}); err != nil {
			t.Fatal(err)
		}
	}

	outDir := t.TempDir()
	out := filepath.Join(outDir, "koe-backup.db")
	opts := Options{Out: out, Path: filepath.Join(data, DatabaseFile), Koe: "http://" + m.Addr()}
	_, err = Run(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "access token") {
		t.Fatalf("a backup without the token: %v", err)
	}
	if left := files(t, outDir); len(left) != 0 {
		t.Fatalf("a refused backup left %v", left)
	}

	opts.Token = token
	res, err := Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.From, "running koe") || res.Histories != 2 {
		t.Fatalf("backup: %s", res)
	}
	if left := files(t, outDir); len(left) != 1 || left[0] != "koe-backup.db" {
		t.Fatalf("the backup's directory holds %v", left)
	}
	copied, err := bolt.OpenReadOnly(out, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	list, err := copied.List(ctx, "koe_default")
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, h := range list {
		records, err := copied.Messages(ctx, "koe_default", h.UID)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range records {
			if r.Role == koe.RoleHuman {
				said = append(said, r.Content)
			}
		}
	}
	if len(said) != 2 {
		t.Fatalf("the backup holds the messages %q", said)
	}
}

// A stopped data directory's koe.db is copied directly, by koe backup's
// command line.
func TestBackupOfStoppedDataDir(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	s, err := bolt.Open(filepath.Join(data, DatabaseFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uid, err := s.Create(ctx, "koe_default")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "koe_default", uid, koe.Record{Role: koe.RoleHuman, Content: "kept while stopped"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "copy.db")
	var stdout, stderr bytes.Buffer
	if code := Main(ctx, []string{"-data", data, "-o", out}, &stdout, &stderr, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "1 histories, 2 records") || !strings.Contains(stdout.String(), "verified") {
		t.Fatalf("koe backup said %q", stdout.String())
	}
	copied, err := bolt.OpenReadOnly(out, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	records, err := copied.Messages(ctx, "koe_default", uid)
	if err != nil || len(records) == 0 || records[len(records)-1].Content != "kept while stopped" {
		t.Fatalf("the copy holds %+v, %v", records, err)
	}
}

// A -o in a directory that does not exist is refused, saying so; a copy
// that fails, whether reading the source or in the check, leaves no
// temporary file and the previous backup as it was.
func TestBackupFailures(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	var stdout, stderr bytes.Buffer
	missing := filepath.Join(t.TempDir(), "no-such-dir", "koe.db")
	if code := Main(ctx, []string{"-data", data, "-o", missing}, &stdout, &stderr, func(string) string { return "" }); code != 1 ||
		!strings.Contains(stderr.String(), "the directory of -o "+missing) || !strings.Contains(stderr.String(), "no such file or directory") {
		t.Fatalf("-o in a missing directory: exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Fatalf("the missing directory was made (%v)", err)
	}

	outDir := t.TempDir()
	out := filepath.Join(outDir, "koe.db.bak")
	if err := os.WriteFile(out, []byte("the previous backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if left := files(t, outDir); len(left) != 1 {
			t.Fatalf("%s: the backup's directory holds %v", what, left)
		}
		if prev, err := os.ReadFile(out); err != nil || string(prev) != "the previous backup" {
			t.Fatalf("%s: the previous backup is now %q (%v)", what, prev, err)
		}
	}
	// No koe.db at all.
	if _, err := Run(ctx, Options{Out: out, Path: filepath.Join(data, DatabaseFile)}); err == nil || !strings.Contains(err.Error(), "no database to back up") {
		t.Fatalf("a data directory without koe.db: %v", err)
	}
	unchanged("no koe.db")
	// A koe.db that is no database.
	junk := filepath.Join(data, DatabaseFile)
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not bbolt "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, Options{Out: out, Path: junk}); err == nil {
		t.Fatal("a koe.db of junk was backed up")
	}
	unchanged("junk koe.db")
	// A copy that arrives whole but does not pass the check.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != server.BackupRoute {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(bytes.Repeat([]byte{0xff}, 64<<10))
	}))
	defer broken.Close()
	if _, err := Run(ctx, Options{Out: out, URL: broken.URL}); err == nil || !strings.Contains(err.Error(), "failed its check") {
		t.Fatalf("a broken copy: %v", err)
	}
	unchanged("a broken copy")
}

// With store: postgres koe backup says how to back PostgreSQL up.
func TestBackupPostgresAdvice(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.yaml")
	if err := os.WriteFile(conf, []byte("store: postgres\nstore_dsn: postgres://koe@127.0.0.1:1/koe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"-config", conf, "-o", filepath.Join(dir, "x.db")}, &stdout, &stderr, func(string) string { return "" })
	if code != 1 || !strings.Contains(stderr.String(), "pg_dump -Fc") || !strings.Contains(stderr.String(), "pg_restore") {
		t.Fatalf("exit %d: %q", code, stderr.String())
	}
	if left := files(t, dir); len(left) != 1 {
		t.Fatalf("the directory holds %v", left)
	}
}
