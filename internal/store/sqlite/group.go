package sqlite

import (
	"context"
	"sync"

	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// group queues transactions that arrive while another group runs, and has
// the first of them (the leader) run the whole queue, up to max calls, as
// one database transaction: what a small write costs is mostly its BEGIN
// and COMMIT, which the group then shares. How a group runs is the
// store's (commitGroup); group only forms the groups. Leadership passes to
// the next waiter after each group, so no caller runs other callers' work
// for long.
type group struct {
	max int

	mu      sync.Mutex
	queue   []*txCall
	leading bool // a caller is running a group
}

// txCall is one transaction waiting for its group.
type txCall struct {
	ctx  context.Context
	fn   func(tx store.Tx) error
	done chan txResult // the result, once the group committed
	lead chan struct{} // closed when this caller must lead the next group
}

// txResult is what a call's transaction came to.
type txResult struct {
	err   error
	panic any // a panic of fn, raised again in its caller
}

// run queues fn and returns its result once a group ran it; commit runs a
// group and returns each call's result, in order.
func (g *group) run(ctx context.Context, fn func(tx store.Tx) error, commit func([]*txCall) []txResult) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	call := &txCall{ctx: ctx, fn: fn, done: make(chan txResult, 1), lead: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, call)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if !lead {
		select {
		case r := <-call.done:
			return r.result()
		case <-call.lead:
		}
	}
	g.runGroup(commit)
	r := <-call.done
	return r.result()
}

func (r txResult) result() error {
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// runGroup runs the queued calls (up to max) with commit, then hands
// leadership to the next waiter, if any.
func (g *group) runGroup(commit func([]*txCall) []txResult) {
	g.mu.Lock()
	n := min(len(g.queue), max(g.max, 1))
	calls := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.mu.Unlock()

	results := commitOrPanic(commit, calls)
	for i, call := range calls {
		call.done <- results[i]
	}

	g.mu.Lock()
	if len(g.queue) == 0 {
		g.leading = false
	} else {
		close(g.queue[0].lead)
	}
	g.mu.Unlock()
}

// commitOrPanic runs commit, turning a panic of its own (not of a call's
// Fn, which Call catches) into every call's result, so that the callers see
// it and leadership still passes on.
func commitOrPanic(commit func([]*txCall) []txResult, calls []*txCall) (results []txResult) {
	defer func() {
		if p := recover(); p != nil {
			results = make([]txResult, len(calls))
			for i := range results {
				results[i].panic = p
			}
		}
	}()
	return commit(calls)
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
