package fakellm

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
)

// Flood is an answer of any size, made up as it is sent so that the fake
// holds none of it: a broken or hostile server's endless line, endless
// error page or endless non-streamed answer.
type Flood struct {
	// Status is the HTTP status (0: 200).
	Status int
	// ContentType defaults to text/event-stream.
	ContentType string
	// Head is sent first, then Fill over and over until Size bytes of it
	// are sent, then Tail. A Fill without a newline makes one line of
	// Size bytes.
	Head, Fill, Tail string
	Size             int64
}

// floodChunk is how much of the flood is written at once.
const floodChunk = 64 << 10

// flood sends f, and stops when the client goes away.
func (c *call) flood(f *Flood) {
	status := f.Status
	if status == 0 {
		status = http.StatusOK
	}
	ct := f.ContentType
	if ct == "" {
		ct = "text/event-stream"
	}
	c.w.Header().Set("Content-Type", ct)
	c.w.WriteHeader(status)
	if c.sendFlood([]byte(f.Head)) != proceed {
		return
	}
	if f.Fill != "" && f.Size > 0 {
		chunk := []byte(strings.Repeat(f.Fill, max(1, floodChunk/len(f.Fill))))
		for left := f.Size; left > 0; {
			p := chunk[:min(int64(len(chunk)), left)]
			if c.sendFlood(p) != proceed {
				return
			}
			left -= int64(len(p))
		}
	}
	c.sendFlood([]byte(f.Tail))
}

func (c *call) sendFlood(p []byte) outcome {
	if len(p) == 0 {
		return proceed
	}
	if out := c.write(p); out != proceed {
		return out
	}
	c.s.flooded.Add(int64(len(p)))
	return proceed
}

// Flooded is how many bytes of Flood answers the server has written so
// far. The kernel's socket buffers hold some of them: they are written,
// not necessarily read.
func (s *Server) Flooded() int64 { return s.flooded.Load() }

// SetResetReused makes the server act as one that restarted while its
// client kept connections alive: a request that arrives on a connection
// which already served one is read and then answered with a TCP reset,
// nothing else. A new connection serves its first request as usual. The
// client sees "connection reset by peer" before any byte of an answer.
func (s *Server) SetResetReused(on bool) { s.resetReused.Store(on) }

// Resets is how many requests SetResetReused answered with a reset.
func (s *Server) Resets() int64 { return s.resets.Load() }

// connKey keys a connection's *connServed in its requests' contexts.
type connKey struct{}

// connServed counts the requests a connection began.
type connServed struct{ n atomic.Int64 }

func withConnServed(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connServed{})
}

// resetIfReused answers the request with a reset and reports true when
// SetResetReused is on and the request came on a used connection.
func (s *Server) resetIfReused(w http.ResponseWriter, r *http.Request) bool {
	served, _ := r.Context().Value(connKey{}).(*connServed)
	if served == nil || served.n.Add(1) == 1 || !s.resetReused.Load() {
		return false
	}
	// The whole request is read first: the client has sent it, and waits
	// for the first byte of an answer.
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBodyBytes))
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		// Lingering for zero seconds makes Close send RST, not FIN.
		_ = tcp.SetLinger(0)
	}
	// Counted before the client can see it.
	s.resets.Add(1)
	_ = conn.Close()
	return true
}
