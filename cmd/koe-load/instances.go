package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"koe/testkit/fakellm"
	"koe/testkit/loadrun"
	"koe/testkit/pgtest"
)

// instances are koe processes that serve one character together. One runs
// alone on its own store; several share a PostgreSQL schema and a Redis
// server, as docs/operations.md runs them, so that a watcher on any of
// them follows a turn on another and a stop sent to any stops it.
type instances struct {
	koes  []*loadrun.Koe
	stops []func() // in the order they must run: koes, then Redis, then the schema
}

// shared is what several instances share: a PostgreSQL DSN of a database
// where koe-load may create a schema, and a Redis URL ("": koe-load starts
// redis-server itself).
type shared struct {
	pgDSN, redisURL string
}

// startInstances starts n koe processes (the binary of -koe), each with
// a fake LLM answering respond, and waits until every one listens. Close
// stops them and whatever was started for them.
func startInstances(ctx context.Context, o options, sh shared, n, conns int, respond func(fakellm.Request) fakellm.Reply) (*instances, error) {
	in := &instances{}
	conf := textOnlyConfig(conns)
	if n > 1 {
		dsn, drop, err := ownSchema(ctx, sh.pgDSN)
		if err != nil {
			return nil, err
		}
		in.stops = append(in.stops, drop)
		url := sh.redisURL
		if url == "" {
			r, err := startRedis(ctx)
			if err != nil {
				in.Close()
				return nil, err
			}
			in.stops = append(in.stops, r.stop)
			url = r.url
		}
		conf += scaleOutConfig(dsn, url)
	}
	for i := range n {
		k, err := loadrun.Launch(ctx, loadrun.Options{
			Bin: o.koeBin, Respond: respond, Config: conf,
			TempPrefix: fmt.Sprintf("koe-load-stop-%d-", i+1), KeepLog: o.keepLog,
		})
		if err != nil {
			in.Close()
			return nil, fmt.Errorf("start koe %d of %d: %w", i+1, n, err)
		}
		in.koes = append(in.koes, k)
		in.stops = append([]func(){func() { k.Stop(10 * time.Second); k.Close() }}, in.stops...)
		// One at a time: the first creates the schema's tables.
		if err := k.WaitListening(time.Minute); err != nil {
			in.Close()
			return nil, fmt.Errorf("koe %d of %d (log %s): %w", i+1, n, k.LogPath, err)
		}
		if o.keepLog {
			fmt.Printf("koe %d's log: %s\n", i+1, k.LogPath)
		}
	}
	return in, nil
}

// Close stops the koes, then Redis if koe-load started it, then drops the
// schema.
func (in *instances) Close() {
	for _, stop := range in.stops {
		stop()
	}
	in.stops = nil
}

// scaleOutConfig is what several instances add to their configuration:
// the PostgreSQL store and coordination through Redis.
func scaleOutConfig(dsn, redisURL string) string {
	q := func(s string) string {
		b, _ := json.Marshal(s) // a JSON string is a YAML double-quoted one
		return string(b)
	}
	return fmt.Sprintf("store: postgres\nstore_dsn: %s\ncoord:\n  backend: redis\n  redis_url: %s\n", q(dsn), q(redisURL))
}

// ownSchema creates a schema of koe-load's own in the database of dsn and
// returns a DSN whose connections use it, and how to drop it: every
// measurement starts from empty tables and leaves nothing behind.
func ownSchema(ctx context.Context, dsn string) (string, func(), error) {
	if dsn == "" {
		return "", nil, errors.New("several instances share a PostgreSQL store: give -pg")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("-pg: %w", err)
	}
	if !strings.HasPrefix(cfg.Host, "/") && !loadrun.IsLoopback(cfg.Host) {
		return "", nil, fmt.Errorf("-pg names %s: koe-load only uses servers on this machine", cfg.Host)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "koe_load_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "koe-load: drop schema %s: %v\n", schema, err)
		}
	}
	return pgtest.WithSearchPath(dsn, schema), drop, nil
}

// redisServer is a redis-server koe-load started: loopback, a free port,
// no persistence, a temporary directory.
type redisServer struct {
	url  string
	stop func()
}

// startRedis runs redis-server and waits until it accepts connections.
func startRedis(ctx context.Context) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("several instances coordinate through Redis: give -redis, or install redis-server: %w", err)
	}
	port, err := loadrun.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "koe-load-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	// This goroutine reads redis-server's output until it ends, which
	// stop makes sure of; it says when the server is ready.
	ready, ended := make(chan struct{}), make(chan struct{})
	var said strings.Builder
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(out)
		seen := false
		for sc.Scan() {
			if !seen {
				said.WriteString(sc.Text() + "\n")
				if seen = strings.Contains(sc.Text(), "Ready to accept connections"); seen {
					close(ready)
				}
			}
		}
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-ended
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	select {
	case <-ready:
	case <-ended:
		stop()
		return nil, fmt.Errorf("redis-server ended before it was ready:\n%s", said.String())
	case <-time.After(time.Minute): // only a hang reaches it
		stop()
		return nil, errors.New("redis-server not ready within a minute")
	}
	return &redisServer{url: "redis://127.0.0.1:" + strconv.Itoa(port), stop: stop}, nil
}
