package main

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

// pprofServer serves Go's profiles (net/http/pprof) on a listener of its
// own, apart from koe's port: profiles show koe's internals and a CPU
// profile costs CPU, so they are for the machine's owner only.
type pprofServer struct {
	srv    *http.Server
	ln     net.Listener
	served chan struct{}
}

// checkPprofAddr accepts host:port on a loopback address only.
func checkPprofAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("-pprof %q: want a loopback host:port such as 127.0.0.1:6060", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-pprof %q: profiles show koe's internals, so they are served on a loopback address only (127.0.0.1 or ::1)", addr)
	}
	return nil
}

// startPprof listens on addr (checked by checkPprofAddr) and serves the
// profiles under /debug/pprof/ until stop.
func startPprof(addr string, log *slog.Logger) (*pprofServer, error) {
	if err := checkPprofAddr(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	p := &pprofServer{
		// No write timeout: a CPU profile answers after its whole duration.
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		ln:     ln,
		served: make(chan struct{}),
	}
	go func() {
		defer close(p.served)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "err", err)
		}
	}()
	log.Warn("serving profiles (net/http/pprof)", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return p, nil
}

// stop closes the listener and any profile being taken, and waits for the
// server's goroutine.
func (p *pprofServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if p.srv.Shutdown(ctx) != nil {
		_ = p.srv.Close() // a CPU profile still running: cut it short
	}
	<-p.served
}
