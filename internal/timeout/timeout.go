// Package timeout bounds one call to a speech engine by a configured limit
// (tts.timeout, asr.timeout), so that one stuck call (a hung server, an
// engine that never ends) cannot hold up a session.
package timeout

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Run calls f with ctx bounded by limit. If f fails once the limit has run
// out, the error names setting ("tts.timeout") and task ("speech
// synthesis"), and wraps context.DeadlineExceeded even if f reported the
// abort in its own words: callers test for the deadline with errors.Is.
// When the caller's own deadline or cancel ended ctx first, f's error is
// returned as it is, since the limit was not what stopped it.
func Run[T any](ctx context.Context, limit time.Duration, setting, task string, f func(context.Context) (T, error)) (T, error) {
	// A cause of its own per call is what tells this limit from any other
	// deadline on ctx, including another Run's further up.
	reached := errors.New(setting + " reached")
	ctx, cancel := context.WithTimeoutCause(ctx, limit, reached)
	defer cancel()
	v, err := f(ctx)
	if err != nil && context.Cause(ctx) == reached {
		var zero T
		return zero, Reached(err, setting, task, limit)
	}
	return v, err
}

// Reached is the error of a task that the limit of setting stopped, for
// callers that bound work Run cannot wrap (a stream read after the call
// that opened it returned): it names the setting and wraps
// context.DeadlineExceeded, as Run's errors do.
func Reached(err error, setting, task string, limit time.Duration) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return fmt.Errorf("%s took longer than %s (%s): %w", task, setting, limit, err)
}
