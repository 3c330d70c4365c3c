package tools

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// errTimedOut is the cancellation cause of a guarded call that ran too long.
var errTimedOut = errors.New("timed out")

// PanicError is a recovered panic of a tool or source.
type PanicError struct {
	Value any
	Stack []byte // for the logs, never for the model
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// guard runs f on its own goroutine with a deadline of timeout (none if zero)
// and turns a panic into a *PanicError. It returns when f does or when ctx is
// done or the deadline passes, whichever comes first: a call that ignores its
// context is abandoned, so one stuck tool cannot hold a step forever. Past
// the deadline the error says "timed out after <timeout>"; when ctx itself is
// done it is context.Cause(ctx).
func guard[T any](ctx context.Context, timeout time.Duration, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		cctx, cancel = context.WithTimeoutCause(ctx, timeout, errTimedOut)
	}
	defer cancel()

	type outcome struct {
		v   T
		err error
	}
	done := make(chan outcome, 1) // buffered: an abandoned f still finishes
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: &PanicError{Value: p, Stack: debug.Stack()}}
			}
		}()
		v, err := f(cctx)
		done <- outcome{v, err}
	}()

	select {
	case o := <-done:
		return o.v, o.err
	case <-cctx.Done():
		var zero T
		if cause := context.Cause(cctx); !errors.Is(cause, errTimedOut) {
			return zero, cause
		}
		return zero, fmt.Errorf("%w after %s", errTimedOut, timeout)
	}
}
