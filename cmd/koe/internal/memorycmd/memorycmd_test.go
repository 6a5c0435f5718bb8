package memorycmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koe"
	"koe/bolt"
	"koe/postgres"
	"koe/testkit/pgtest"
)

func TestEvalCommand(t *testing.T) {
	var out, errs bytes.Buffer
	code := Eval(context.Background(), []string{"locomo", "-data", miniData, "-budget", "1000"}, &out, &errs, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, want := range []string{"1 conversations, 7 messages, 6 questions", "budget", "1000", "83.3%"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, args := range [][]string{{"locomo"}, {"locomo", "-data", "x", "-budget", "10"}, {"other"}} {
		errs.Reset()
		if code := Eval(context.Background(), args, &out, &errs, nil); code != 2 || errs.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs.String())
		}
	}
}

func TestRebuildCommand(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := bolt.Open(filepath.Join(dir, DatabaseFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uid := koe.NewHistoryUID(time.Now())
	err = store.CreateWith(ctx, "koe_default", uid,
		koe.Record{Role: koe.RoleHuman, Name: "Human", Content: "My dog is Biscuit."},
		koe.Record{Role: koe.RoleAI, Name: "Koe", Content: "What a lovely name."})
	if err != nil {
		t.Fatal(err)
	}
	// While koe holds the database, rebuild says what to do.
	var out, errs bytes.Buffer
	getenv := func(string) string { return "" }
	conf := filepath.Join(dir, "conf.yaml")
	if err := os.WriteFile(conf, []byte("log_level: warn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"rebuild", "-config", conf, "-data", dir}
	if code := Memory(context.Background(), args, &out, &errs, getenv); code != 1 || !strings.Contains(errs.String(), "stop koe first") {
		t.Fatalf("with the database in use: exit %d, %q", code, errs.String())
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	errs.Reset()
	if code := Memory(context.Background(), args, &out, &errs, getenv); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "koe_default: 2 memories from 1 histories") {
		t.Errorf("output %q", out.String())
	}
	store, err = bolt.Open(filepath.Join(dir, DatabaseFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	marks, err := store.RecallMarks(ctx, "koe_default")
	if err != nil || marks[uid].Seq == 0 || marks[uid].Turn != 1 {
		t.Errorf("marks %+v, %v", marks, err)
	}
}

// With store: postgres, rebuild works on the PostgreSQL store, the DSN
// coming from KOE_DATABASE_URL as for koe.
func TestRebuildCommandPostgres(t *testing.T) {
	dsn := pgtest.Schema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	uid := koe.NewHistoryUID(time.Now())
	err = store.CreateWith(ctx, "koe_default", uid,
		koe.Record{Role: koe.RoleHuman, Name: "Human", Content: "My dog is Biscuit."},
		koe.Record{Role: koe.RoleAI, Name: "Koe", Content: "What a lovely name."})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf.yaml")
	if err := os.WriteFile(conf, []byte("log_level: warn\nstore: postgres\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	getenv := func(k string) string {
		if k == "KOE_DATABASE_URL" {
			return dsn
		}
		return ""
	}
	// No koe.db anywhere: the data directory is not used.
	args := []string{"rebuild", "-config", conf, "-data", filepath.Join(dir, "nowhere")}
	if code := Memory(ctx, args, &out, &errs, getenv); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if !strings.Contains(out.String(), "koe_default: 2 memories from 1 histories") {
		t.Errorf("output %q", out.String())
	}
	marks, err := store.RecallMarks(ctx, "koe_default")
	if err != nil || marks[uid].Seq == 0 || marks[uid].Turn != 1 {
		t.Errorf("marks %+v, %v", marks, err)
	}
}
