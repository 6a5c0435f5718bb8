package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Backup copies the store for `koe backup`: koe.db, which koe holds
// locked while it runs, so that no other process can read it.
type Backup interface {
	// WriteBackup writes a consistent copy of the database to w, calling
	// size with the copy's length before its first byte.
	WriteBackup(ctx context.Context, w io.Writer, size func(int64)) (int64, error)
}

// BackupRoute is where `koe backup` fetches a running koe's database.
const BackupRoute = "/api/admin/backup"

// backupRoutes serves GET /api/admin/backup: the whole database, for
// `koe backup` on the same machine. guard has checked the host and the
// token (when there is one); the route itself takes only requests from
// loopback that no proxy forwarded and no web page sent, since the copy
// holds every conversation of every user.
func (s *Server) backupRoutes(api fiber.Router) {
	api.Get("/admin/backup", s.backup)
}

func (s *Server) backup(c *fiber.Ctx) error {
	if err := adminOnly(c); err != nil {
		return err
	}
	if s.opts.Backup == nil {
		return fiber.NewError(fiber.StatusNotImplemented, "koe keeps its data in PostgreSQL (store: postgres), "+
			"which koe backup does not copy: back it up with pg_dump (see Backups in docs/operations.md)")
	}
	// Registered with the connections Shutdown waits for, so that the
	// read transaction ends before the store closes. A drain lets it run:
	// it is no turn, and the store stays open until it ends.
	if err := s.startBackground(); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	sized := make(chan int64, 1)
	failed := make(chan error, 1)
	conn := c.Context().Conn()
	start := time.Now()
	// The copy runs beside the connection's writer, which reads it from
	// the pipe. It ends when the copy is written, when the writer stops
	// reading (fasthttp closes the pipe's reader after the response, sent
	// or not), or at shutdown; a client that takes nothing for
	// server.write_timeout has its connection cut, which ends the read
	// transaction the copy holds open.
	go func() {
		defer s.conns.Done()
		w := &deadlineWriter{conn: conn, w: pw, timeout: s.cfg.WriteTimeout}
		n, err := s.opts.Backup.WriteBackup(s.base, w, func(n int64) { sized <- n })
		if err != nil {
			_ = pw.CloseWithError(err)
			failed <- err
			s.log.Warn("backup not sent whole", "bytes", n, "elapsed", time.Since(start).Round(time.Millisecond), "err", err)
			return
		}
		_ = pw.Close()
		s.log.Info("backup sent", "bytes", n, "elapsed", time.Since(start).Round(time.Millisecond))
	}()
	select {
	case n := <-sized:
		c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="koe.db"`)
		c.Set(fiber.HeaderCacheControl, "no-store")
		c.Set("X-Koe-Backup-Bytes", strconv.FormatInt(n, 10))
		// The deadlines the copy set stay on the connection.
		c.Context().SetConnectionClose()
		c.Response().SetBodyStream(pr, int(n))
		return nil
	case err := <-failed:
		_ = pr.Close()
		return fmt.Errorf("back up the database: %w", err)
	}
}

// adminOnly refuses an admin request that did not come straight from this
// machine: from another address, through a proxy (which connects from
// loopback, but says whom for), or from a web page.
func adminOnly(c *fiber.Ctx) error {
	const why = "the admin API answers only requests from this machine, not through a proxy nor from a web page (run koe backup on koe's machine)"
	// A client on this machine connects from loopback, or from the very
	// address it connects to (koe listening on a LAN address only).
	if ip := c.Context().RemoteIP(); !ip.IsLoopback() && !ip.Equal(c.Context().LocalIP()) {
		return fiber.NewError(fiber.StatusForbidden, why+"; this one came from "+ip.String())
	}
	for _, h := range []string{fiber.HeaderXForwardedFor, "Forwarded", "X-Real-Ip", fiber.HeaderOrigin} {
		if len(c.Request().Header.Peek(h)) > 0 {
			return fiber.NewError(fiber.StatusForbidden, why+"; this one carries "+h)
		}
	}
	return nil
}

// deadlineWriter gives each write of a streamed response timeout to
// reach the client: a client that stops reading is cut off rather than
// holding the copy open.
type deadlineWriter struct {
	conn    net.Conn
	w       io.Writer
	timeout time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if d.timeout > 0 {
		if err := d.conn.SetWriteDeadline(time.Now().Add(d.timeout)); err != nil {
			return 0, err
		}
	}
	return d.w.Write(p)
}
