package timeout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	// The limit runs out: the error says so, and wraps DeadlineExceeded
	// even though f described the abort its own way.
	v, err := Run(context.Background(), 10*time.Millisecond, "tts.timeout", "speech synthesis", func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 1, errors.New("engine gave up")
	})
	want := "speech synthesis took longer than tts.timeout (10ms): context deadline exceeded: engine gave up"
	if v != 0 || !errors.Is(err, context.DeadlineExceeded) || err == nil || err.Error() != want {
		t.Errorf("limit reached: %d, %v; want 0, %q", v, err, want)
	}

	// The caller's deadline is the caller's: no mention of the setting.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = Run(ctx, time.Minute, "tts.timeout", "speech synthesis", func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "tts.timeout") {
		t.Errorf("caller deadline: %v", err)
	}

	// Within the limit, f's result passes through.
	if v, err := Run(context.Background(), time.Minute, "tts.timeout", "speech synthesis", func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Errorf("in time: %d, %v", v, err)
	}
}
