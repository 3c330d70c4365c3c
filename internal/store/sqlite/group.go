package sqlite

import (
	"context"

	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// txCall is one transaction waiting for its commit group.
type txCall struct {
	ctx context.Context
	fn  func(tx store.Tx) error
}

// txResult is what a call's transaction came to.
type txResult struct {
	err   error
	panic any // a panic of fn, raised again in its caller
}

func (r txResult) result() error {
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// call runs the call's fn on tx, turning a panic into a result for its
// caller. A caller whose context ended meanwhile gets its context's error:
// its work must be rolled back, as a plain transaction's would be.
func (c *txCall) call(tx store.Tx) (r txResult) {
	defer func() {
		if p := recover(); p != nil {
			r = txResult{panic: p}
		}
	}()
	err := c.fn(tx)
	if err == nil {
		err = c.ctx.Err()
	}
	return txResult{err: err}
}

// failed reports whether the call's transaction must not commit.
func (r txResult) failed() bool { return r.err != nil || r.panic != nil }

// fill sets err as the result of every call that has no outcome of its own
// yet (a group that failed as a whole).
func fill(results []txResult, err error) []txResult {
	for i := range results {
		if !results[i].failed() {
			results[i].err = err
		}
	}
	return results
}

// runAfter runs the AfterCommit functions (store.Tx) of a group's committed
// calls, call after call, in order. A function that panics ends its call's
// functions and becomes that call's result, as it would have been had the
// caller run them: the other calls' functions still run.
func runAfter(after [][]func(), results []txResult) []txResult {
	for i, fns := range after {
		if p := dbutil.RunAfterOne(fns); p != nil {
			results[i] = txResult{panic: p}
		}
	}
	return results
}
