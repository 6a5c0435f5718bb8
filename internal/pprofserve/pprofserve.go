// Package pprofserve serves Go's profiles (net/http/pprof) on a loopback
// listener of its own, apart from any product port: profiles show the
// process's internals and a CPU profile costs CPU, so they are for the
// machine's owner only. koe's -pprof and koe-load's bare relay use it.
package pprofserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Server is a running profile server. Stop it.
type Server struct {
	srv    *http.Server
	ln     net.Listener
	served chan struct{}
}

// Check accepts host:port on a loopback address only; flag names the
// command-line flag in the error.
func Check(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%s %q: want a loopback host:port such as 127.0.0.1:6060", flag, addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s %q: profiles show the process's internals, so they are served on a loopback address only (127.0.0.1 or ::1)", flag, addr)
	}
	return nil
}

// Start listens on addr (which must pass Check) and serves the profiles
// under /debug/pprof/ until Stop, through guard when it is not nil (koe
// puts them behind its Host check and token).
func Start(flag, addr string, log *slog.Logger, guard func(http.Handler) http.Handler) (*Server, error) {
	if err := Check(flag, addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var h http.Handler = mux
	if guard != nil {
		h = guard(mux)
	}
	s := &Server{
		// No write timeout: a CPU profile answers after its whole duration.
		srv:    &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 16 << 10},
		ln:     ln,
		served: make(chan struct{}),
	}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "err", err)
		}
	}()
	log.Warn("serving profiles (net/http/pprof)", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return s, nil
}

// Stop closes the listener and any profile being taken, and waits for the
// server's goroutine.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		_ = s.srv.Close() // a CPU profile still running: cut it short
	}
	<-s.served
}
