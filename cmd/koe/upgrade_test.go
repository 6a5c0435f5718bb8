package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe/postgres"
	"koe/testkit/pgtest"
)

// Migrations a newer koe adds in the upgrade test, put into the postgres
// package by go build -overlay: one that expands the schema (a table, and
// a column with a default), and one that contracts it (drops that column,
// declaring that only a koe knowing its version may run after it).
const (
	upgradeExpand = `package postgres

func init() {
	storeMigrations = append(storeMigrations, migration{
		Version: len(storeMigrations) + 1,
		Name:    "upgrade test: a table and a column with a default",
		Statements: []string{
			"CREATE TABLE koe_upgrade_test (id integer PRIMARY KEY)",
			"ALTER TABLE koe_histories ADD COLUMN upgrade_test_note text NOT NULL DEFAULT ''",
		},
	})
}
`
	upgradeContract = `package postgres

func init() {
	storeMigrations = append(storeMigrations, migration{
		Version:        len(storeMigrations) + 1,
		Name:           "upgrade test: the column goes",
		CompatibleFrom: len(storeMigrations) + 1,
		Statements:     []string{"ALTER TABLE koe_histories DROP COLUMN upgrade_test_note"},
	})
}
`
)

// buildKoe builds cmd/koe from this tree into dir/name, with the files of
// extra (name: source) added to the postgres package by an overlay.
func buildKoe(t *testing.T, dir, name string, extra map[string]string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	overlay := map[string]map[string]string{"Replace": {}}
	for file, src := range extra {
		path := filepath.Join(dir, name+"-"+file)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay["Replace"][filepath.Join(root, "postgres", file)] = path
	}
	data, _ := json.Marshal(overlay)
	overlayFile := filepath.Join(dir, name+"-overlay.json")
	if err := os.WriteFile(overlayFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-overlay", overlayFile, "-o", bin, "./cmd/koe")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

// A rolling upgrade that can roll back, with two binaries built from two
// trees (this one, and this one with a migration more) on one PostgreSQL:
// the newer koe expands the schema to the next version, and the older one
// goes on serving turns on it, both the process that ran before and one
// started after; a later koe whose migration contracts the schema makes
// the older ones refuse to start, saying which koe they need.
func TestUpgradeExpandContract(t *testing.T) {
	if testing.Short() {
		t.Skip("builds koe three times and runs it in child processes")
	}
	dsn := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bins := t.TempDir()
	oldBin := buildKoe(t, bins, "koe-old", nil)
	expandBin := buildKoe(t, bins, "koe-expand", map[string]string{"zz_upgrade_a.go": upgradeExpand})
	contractBin := buildKoe(t, bins, "koe-contract", map[string]string{"zz_upgrade_a.go": upgradeExpand, "zz_upgrade_b.go": upgradeContract})

	llm := echoLLM(t)
	n := 0
	// command is a koe of bin with a data directory of its own on the
	// shared database.
	command := func(bin string) *exec.Cmd {
		n++
		conf := textKoeConf(t, filepath.Join(t.TempDir(), fmt.Sprint(n)), llm.URL(), "store: postgres\n")
		cmd := exec.CommandContext(ctx, bin, "-config", conf, "-port", "0")
		cmd.Env = append(os.Environ(), "KOE_DATABASE_URL="+dsn)
		return cmd
	}
	// schema reads where the store's schema is, as this tree's koe finds
	// it.
	schema := func() (version, known, compat int) {
		t.Helper()
		s, err := postgres.Open(ctx, dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		version, known, compat, _ = s.Schema()
		return version, known, compat
	}
	wantSchema := func(what string, version, compat int) {
		t.Helper()
		if v, _, c := schema(); v != version || c != compat {
			t.Fatalf("%s: the schema is at version %d, compatible from %d; want %d, %d", what, v, c, version, compat)
		}
	}
	_, known, _ := schema()

	old := startKoeCmd(t, command(oldBin))
	uid := turn(t, old.addr, "", "", "said to the old koe")

	// The new koe expands the schema; the old one serves on it.
	expand := startKoeCmd(t, command(expandBin))
	wantSchema("after the expanding koe started", known+1, 1)
	turn(t, expand.addr, uid, "said to the old koe", "said to the new koe")
	turn(t, old.addr, uid, "said to the new koe", "said to the old koe after the upgrade")
	// Rolled back: the new koe stops, an old one starts on the schema it
	// left.
	if err := expand.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-expand.exited
	again := startKoeCmd(t, command(oldBin))
	turn(t, again.addr, uid, "said to the old koe after the upgrade", "said to an old koe started after the rollback")

	// A contracting koe: the old ones can no longer start.
	// (This tree's koe refuses it too: the schema is read from the
	// refusals.)
	contract := startKoeCmd(t, command(contractBin))
	turn(t, contract.addr, uid, "said to an old koe started after the rollback", "said to the contracting koe")
	for _, bin := range []struct{ name, path string }{{"the old koe", oldBin}, {"the expanding koe", expandBin}} {
		out, err := command(bin.path).CombinedOutput()
		want := fmt.Sprintf("the database's schema is at version %d, newer than this koe knows (%d), and a migration since removed what older koe use: it needs a koe that knows version %d or later",
			known+2, known+strings.Count(bin.name, "expanding"), known+2)
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("%s on the contracted schema: %v\n%s\nwant it to refuse, saying %q", bin.name, err, out, want)
		}
	}
}
