//go:build linux

package proc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"koe/internal/proc"
	"koe/testkit/proctest"
)

// TestCancelKillsGroup runs a shell that does not exec its child, the way
// wrapper scripts often look. Killing only the shell would orphan sleep,
// which would keep the output pipe open until WaitDelay and outlive the
// hang guard of WaitGone, which then fails the test.
func TestCancelKillsGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := proc.Command(ctx, "/bin/sh", "-c", "sleep 3600; echo done")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	shell := proctest.WaitForChild(t, os.Getpid(), "/bin/sh")
	sleep := proctest.WaitForChild(t, shell, "sleep")
	cancel()
	err := cmd.Wait()
	if !errors.Is(ctx.Err(), context.Canceled) || err == nil {
		t.Errorf("Wait = %v after the cancel, want the kill", err)
	}
	proctest.WaitGone(t, shell)
	proctest.WaitGone(t, sleep)
}

// TestCancelAfterExit checks that a cancel after the command ended is not
// an error: the group is gone, and there is nothing left to stop.
func TestCancelAfterExit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := proc.Command(ctx, "/bin/sh", "-c", "exit 0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := cmd.Cancel(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Cancel after exit = %v, want os.ErrProcessDone", err)
	}
}
