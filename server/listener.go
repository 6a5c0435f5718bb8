package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// connTracker owns koe's listening socket and every connection it accepts:
// it survives accept errors (running out of file descriptors must not stop
// koe), caps open connections at server.max_connections, and knows which
// connections hold no request in a handler so that shutdown can close them
// at once. (Silent connections are fasthttp's: its read and idle timeouts
// run from a connection's start.)
type connTracker struct {
	max int
	// reserve more connections are let in past max for the probes
	// (/healthz, /readyz, /metrics) alone, so that a load balancer or a
	// liveness probe still hears from a koe that clients keep full.
	reserve int
	log     *slog.Logger

	mu      sync.Mutex
	conns   map[*trackedConn]struct{} // open, hijacked WebSockets included
	closing bool                      // shutdown has begun

	// rejecters bounds the goroutines writing 503s, so that a flood over
	// the cap costs a bounded number of descriptors and goroutines.
	rejecters chan struct{}
	acceptLog rateLimited
	rejectLog rateLimited
}

// connPhase is where a connection is in its life. Only phaseHandling and
// phaseHijacked connections survive the start of a shutdown.
type connPhase int

const (
	phaseWaiting  connPhase = iota // new, reading a request, or idle between requests
	phaseHandling                  // a handler runs or its response is written
	phaseHijacked                  // a WebSocket, closed by its session
)

const (
	maxRejecters = 256
	// busyWriteTimeout bounds writing a 503 to a client over the cap;
	// busyLinger lets the client's request arrive before the close, so the
	// close does not reset the connection under the 503.
	busyWriteTimeout = 2 * time.Second
	busyLinger       = 250 * time.Millisecond
	// Accept errors are retried after a pause that doubles up to
	// maxAcceptBackoff, and logged at most once per acceptLogInterval.
	minAcceptBackoff  = 5 * time.Millisecond
	maxAcceptBackoff  = time.Second
	acceptLogInterval = time.Minute
)

func newConnTracker(maxConns, reserve int, log *slog.Logger) *connTracker {
	return &connTracker{
		max:       maxConns,
		reserve:   reserve,
		log:       log,
		conns:     map[*trackedConn]struct{}{},
		rejecters: make(chan struct{}, maxRejecters),
		acceptLog: rateLimited{every: acceptLogInterval},
		rejectLog: rateLimited{every: acceptLogInterval},
	}
}

// listen wraps ln; closing the result closes ln. ln may be a TLS
// listener: its connections are tracked as they arrive, before their
// handshake, which runs on the connection's own goroutine (fasthttp's
// first read, within server.read_timeout), never in the accept loop; a
// connection over the cap gets its 503 after the handshake, from a
// rejecter.
func (t *connTracker) listen(ln net.Listener) net.Listener {
	return &trackedListener{Listener: ln, t: t, done: make(chan struct{})}
}

// open is the number of open connections.
func (t *connTracker) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// admit registers c, or turns it away: with a 503 when koe is at the cap
// and its reserve, silently when it is shutting down. A connection let in
// past the cap is marked as in the reserve.
func (t *connTracker) admit(c net.Conn) *trackedConn {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		_ = c.Close()
		return nil
	}
	if len(t.conns) >= t.max+t.reserve {
		t.mu.Unlock()
		t.reject(c)
		return nil
	}
	tc := &trackedConn{Conn: c, t: t, line: requestLine{pending: true}}
	if len(t.conns) >= t.max {
		tc.reservedUntil = time.Now().Add(reservedRequestWait)
	}
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	return tc
}

// reject answers a connection over the cap without holding up the accept
// loop: a short 503 from a bounded set of goroutines, or a plain close when
// they are all busy.
func (t *connTracker) reject(c net.Conn) {
	if n, ok := t.rejectLog.due(); ok {
		t.log.Warn("connection refused: koe is at server.max_connections", "max_connections", t.max, "refused_since_last_log", n)
	}
	select {
	case t.rejecters <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-t.rejecters }()
		writeBusy(c, t.max)
	}()
}

func writeBusy(c net.Conn, maxConns int) {
	defer c.Close()
	body := fmt.Sprintf("koe is at its connection limit (server.max_connections = %d); try again shortly\n", maxConns)
	resp := "HTTP/1.1 503 Service Unavailable\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"X-Content-Type-Options: nosniff\r\n" +
		"Content-Security-Policy: " + strictCSP + "\r\n" +
		"Retry-After: 5\r\n" +
		"Connection: close\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	_ = c.SetDeadline(time.Now().Add(busyWriteTimeout))
	if _, err := io.WriteString(c, resp); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(busyLinger))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
}

// shutdown closes every connection that holds no request in a handler and
// no WebSocket; connections that reach that state later are closed then.
func (t *connTracker) shutdown() {
	t.mu.Lock()
	t.closing = true
	var idle []*trackedConn
	for c := range t.conns {
		if c.phase == phaseWaiting {
			idle = append(idle, c)
		}
	}
	t.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}

// connState follows fasthttp's view of each connection.
func (t *connTracker) connState(c net.Conn, state fasthttp.ConnState) {
	tc, ok := tracked(c)
	if !ok {
		return
	}
	switch state {
	case fasthttp.StateActive:
		tc.line.started()
		tc.setPhase(phaseWaiting)
	case fasthttp.StateIdle:
		tc.line.next()
		tc.setPhase(phaseWaiting)
	case fasthttp.StateNew:
		tc.setPhase(phaseWaiting)
	case fasthttp.StateHijacked:
		tc.setPhase(phaseHijacked)
	}
}

// handling marks the connection of a request whose handler starts.
func handling(c net.Conn) {
	if tc, ok := tracked(c); ok {
		tc.setPhase(phaseHandling)
	}
}

type trackedListener struct {
	net.Listener
	t         *connTracker
	done      chan struct{} // closed by Close: stops a backoff pause
	closeOnce sync.Once
}

// Accept returns the next admitted connection. Errors other than a closed
// listener (EMFILE above all) are waited out, not returned: fasthttp would
// stop serving for good on any of them.
func (l *trackedListener) Accept() (net.Conn, error) {
	backoff := time.Duration(0)
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			if n, ok := l.t.acceptLog.due(); ok {
				l.t.log.Error("accepting connections failed; koe keeps serving open ones and retries (out of file descriptors? lower server.max_connections or raise the open-file limit)",
					"err", err, "failures_since_last_log", n, "open_connections", l.t.open())
			}
			backoff = min(max(2*backoff, minAcceptBackoff), maxAcceptBackoff)
			pause := time.NewTimer(backoff)
			select {
			case <-pause.C:
			case <-l.done:
				pause.Stop()
				return nil, net.ErrClosed
			}
			continue
		}
		backoff = 0
		if tc := l.t.admit(c); tc != nil {
			if _, isTLS := c.(*tls.Conn); isTLS {
				return tlsTrackedConn{tc}, nil
			}
			return tc, nil
		}
	}
}

func (l *trackedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// trackedConn is one accepted connection; it leaves the tracker when it is
// closed, by fasthttp or, once hijacked, by its WebSocket session.
type trackedConn struct {
	net.Conn
	t *connTracker
	// reservedUntil is set on a connection let in past
	// server.max_connections, for one probe only: the connection is closed
	// after it, and no read on it may wait past this time.
	reservedUntil time.Time
	// line checks how the request line ends (fasthttp takes a bare LF
	// there); only the goroutine serving the connection touches it.
	line      requestLine
	phase     connPhase // guarded by t.mu
	closeOnce sync.Once
	closeErr  error
	lingers   atomic.Bool // see lingerOnClose
}

func (c *trackedConn) setPhase(p connPhase) {
	t := c.t
	t.mu.Lock()
	if _, open := t.conns[c]; !open {
		t.mu.Unlock()
		return
	}
	c.phase = p
	closeNow := t.closing && p == phaseWaiting
	t.mu.Unlock()
	if closeNow {
		_ = c.Close()
	}
}

// reservedRequestWait is how long a connection in the reserve past
// server.max_connections may take to send its request: a probe sends it
// at once, and an idle connection must not hold a place kept for probes.
const reservedRequestWait = 2 * time.Second

// Read fails once the request line turns out to end in a bare LF, so that
// fasthttp, which would wait for a CR LF CR LF that may never come, refuses
// the request at once (a request whose head is read whole by then is
// refused by guard).
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.line.scan(p[:n]) && err == nil {
		err = errBareLF
	}
	return n, err
}

func (c *trackedConn) reserved() bool { return !c.reservedUntil.IsZero() }

// SetReadDeadline keeps a reserved connection's reads within
// reservedUntil, whatever deadline fasthttp asks for.
func (c *trackedConn) SetReadDeadline(t time.Time) error {
	if c.reserved() && (t.IsZero() || t.After(c.reservedUntil)) {
		t = c.reservedUntil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *trackedConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// SyscallConn reaches the socket under the tracking (see watchPeer).
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

func (c *trackedConn) Close() error {
	c.closeOnce.Do(func() {
		if c.lingers.Load() {
			if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				go c.drainThenClose()
				return
			}
		}
		c.closeErr = c.Conn.Close()
		c.forget()
	})
	return c.closeErr
}

// Refusals of a request whose body was not read linger before the close:
// closing a socket with unread data resets it, and a client still sending
// that body may then lose the answer it was sent. The client gets the end
// of the answer (FIN), and what it still sends is read and dropped, within
// bounds, until it stops or the time is up; the connection keeps its place
// meanwhile.
const (
	refusalLinger      = time.Second
	refusalLingerBytes = 16 << 20
)

// lingerOnClose makes the close of this connection linger (see
// refusalLinger).
func (c *trackedConn) lingerOnClose() { c.lingers.Store(true) }

func (c *trackedConn) drainThenClose() {
	_ = c.Conn.SetReadDeadline(time.Now().Add(refusalLinger))
	_, _ = io.CopyN(io.Discard, c.Conn, refusalLingerBytes)
	_ = c.Conn.Close()
	c.forget()
}

// forget takes the connection off the tracker's books.
func (c *trackedConn) forget() {
	c.t.mu.Lock()
	delete(c.t.conns, c)
	c.t.mu.Unlock()
}

// rateLimited lets an event through at most once per interval and counts
// the ones in between.
type rateLimited struct {
	every time.Duration
	last  atomic.Int64 // unix nanoseconds of the last event let through
	count atomic.Int64 // events since then
}

func (r *rateLimited) due() (int64, bool) {
	n := r.count.Add(1)
	now := time.Now().UnixNano()
	last := r.last.Load()
	if last != 0 && now-last < int64(r.every) {
		return 0, false
	}
	if !r.last.CompareAndSwap(last, now) {
		return 0, false
	}
	r.count.Add(-n)
	return n, true
}
