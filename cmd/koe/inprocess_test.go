package main

import (
	"context"
	"testing"
)

// inProcessKoe is koe's run with a configuration file, in this process,
// serving until the test ends; its log is what it wrote to stderr.
type inProcessKoe struct {
	port string
	log  *syncBuffer
	stop func() error
}

// runInProcess starts run with conf and getenv on a free port and waits
// until it answers /healthz. stop ends it and returns run's error; the
// test's end stops it too.
func runInProcess(t *testing.T, conf string, getenv func(string) string) *inProcessKoe {
	t.Helper()
	keepDefaultLogger(t)
	k := &inProcessKoe{port: freePort(t), log: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-config", writeConf(t, conf), "-port", k.port}, k.log, getenv) }()
	var err error
	stopped := false
	k.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = k.stop() })
	waitHealthy(t, "http://127.0.0.1:"+k.port+"/healthz", done)
	return k
}
