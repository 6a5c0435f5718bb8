package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"koe/server"
)

// backupFake is a store's copy: size bytes of a pattern, written in
// pieces; done receives how WriteBackup ended.
type backupFake struct {
	size int64
	done chan error
}

func (b *backupFake) WriteBackup(ctx context.Context, w io.Writer, size func(int64)) (int64, error) {
	size(b.size)
	var n int64
	piece := bytes.Repeat([]byte("koe.db "), 32<<10/7)
	for n < b.size && ctx.Err() == nil {
		m, err := w.Write(piece[:min(int64(len(piece)), b.size-n)])
		n += int64(m)
		if err != nil {
			b.done <- err
			return n, err
		}
	}
	b.done <- ctx.Err()
	return n, ctx.Err()
}

// GET /api/admin/backup streams the store's copy to a client on this
// machine with the token, and refuses a request without the token,
// through a proxy or from a web page; without a copy to make (PostgreSQL)
// it says to use pg_dump.
func TestBackupRoute(t *testing.T) {
	const token = "backup-route-token-0123456789"
	fake := &backupFake{size: 3<<20 + 5, done: make(chan error, 4)}
	k := startFake(t, func(o *server.Options) {
		o.Config.AuthToken = token
		o.Backup = fake
	})
	get := func(header ...string) reply {
		req, err := http.NewRequest(http.MethodGet, "http://"+k.addr+server.BackupRoute, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return exchange(t, req)
	}
	bearer := "Bearer " + token
	get().want(t, "no token", http.StatusUnauthorized, "koe needs its access token")
	get("Authorization", "Bearer wrong-token-0123456789").want(t, "a wrong token", http.StatusUnauthorized, "")
	get("Authorization", bearer, "X-Forwarded-For", "203.0.113.9").want(t, "through a proxy", http.StatusForbidden, "not through a proxy")
	get("Authorization", bearer, "Forwarded", "for=203.0.113.9").want(t, "through a proxy", http.StatusForbidden, "not through a proxy")
	get("Authorization", bearer, "Origin", "http://localhost:3000").want(t, "from a web page", http.StatusForbidden, "nor from a web page")

	a := get("Authorization", bearer)
	if a.status != http.StatusOK || int64(len(a.body)) != fake.size || a.header.Get("Content-Length") != fmt.Sprint(fake.size) {
		t.Fatalf("backup: %d, %d bytes (Content-Length %s), want 200 and %d", a.status, len(a.body), a.header.Get("Content-Length"), fake.size)
	}
	if !bytes.HasPrefix(a.body, []byte("koe.db koe.db ")) {
		t.Fatalf("backup body starts %q", a.body[:16])
	}
	if err := <-fake.done; err != nil {
		t.Fatalf("the copy ended with %v", err)
	}

	pg := startFake(t)
	pg.do(t, http.MethodGet, server.BackupRoute, nil).want(t, "no copy to make", http.StatusNotImplemented, "pg_dump")
}

// A client that stops reading a backup is cut off after
// server.write_timeout, which ends the copy (and the read transaction it
// holds open) rather than leaving it waiting.
func TestBackupStalledClient(t *testing.T) {
	fake := &backupFake{size: 1 << 30, done: make(chan error, 1)}
	k := startFake(t, func(o *server.Options) {
		o.Config.WriteTimeout = 200 * time.Millisecond
		o.Backup = fake
	})
	conn, err := net.Dial("tcp", k.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A small receive window: the stall is felt at once.
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", server.BackupRoute, k.addr)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("status line %q, %v", status, err)
	}
	// Nothing more is read.
	select {
	case err := <-fake.done:
		if err == nil {
			t.Fatal("the whole gigabyte went to a client that read none of it")
		}
	case <-time.After(time.Minute):
		t.Fatal("the copy still runs for a client that stopped reading")
	}
}
