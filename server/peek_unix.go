//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// watchPeer closes gone when the peer of conn closes its side, so that a
// response being streamed notices a client that left while there is
// nothing to write. It peeks and never consumes: a byte the client sent (a
// pipelined request) stays for fasthttp, and the watch then ends without a
// verdict. stop ends the watch and returns once it has, with the
// connection's read deadline cleared: fasthttp reads the next request
// right after.
func watchPeer(conn net.Conn) (gone <-chan struct{}, stop func()) {
	closedCh := make(chan struct{})
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return closedCh, func() {} // TLS or a test double: writes will tell
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return closedCh, func() {}
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		var buf [1]byte
		closed := false
		// Read waits in the runtime's poller until the socket is
		// readable, calling the function each time it may be.
		err := raw.Read(func(fd uintptr) bool {
			n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EAGAIN):
				return false // nothing yet: wait
			case err == nil && n > 0:
				return true // data: not ours to judge
			default:
				closed = true // EOF, or the connection broke
				return true
			}
		})
		if err == nil && closed {
			close(closedCh)
		}
	}()
	return closedCh, func() {
		// Wake a waiting Read, then give the connection back without
		// a deadline.
		_ = conn.SetReadDeadline(time.Now())
		<-ended
		_ = conn.SetReadDeadline(time.Time{})
	}
}
