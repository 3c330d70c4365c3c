package dbutil

import (
	"context"
	"errors"
	"sync"

	"github.com/parleyhq/parley/internal/store"
)

// Group queues transactions that arrive while another group runs, and has
// the first of them (the leader) run the whole queue, up to Max calls, as
// one database transaction: what a small write costs is mostly its BEGIN,
// COMMIT and the wait for the log to reach the disk, which the group then
// shares. How a group runs is the store's (its commit function); Group
// only forms the groups. Leadership passes to the next waiter after each
// group, so no caller runs other callers' work for long.
type Group struct {
	Max int

	mu      sync.Mutex
	queue   []*TxCall
	leading bool // a caller is running a group
}

// TxCall is one transaction waiting for its group.
type TxCall struct {
	Ctx context.Context
	Fn  func(tx store.Tx) error
	// Shared: the call came through InGroupTx, so it may share the group's
	// transaction with no savepoint of its own and run again alone when
	// another call of the group fails (ErrRunAlone).
	Shared bool
	done   chan TxResult // the result, once the group committed
	lead   chan struct{} // closed when this caller must lead the next group
}

// TxResult is what a call's transaction came to.
type TxResult struct {
	Err   error
	Panic any // a panic of Fn, raised again in its caller
}

// ErrRunAlone tells a call to run again: its group could not commit as a
// whole, through no fault of the call.
var ErrRunAlone = errors.New("the group failed: run again")

// Run queues fn (shared: see TxCall.Shared) and returns its result once a
// group ran it; commit runs a group and returns each call's result, in
// order.
func (g *Group) Run(ctx context.Context, fn func(tx store.Tx) error, shared bool, commit func([]*TxCall) []TxResult) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	call := &TxCall{Ctx: ctx, Fn: fn, Shared: shared, done: make(chan TxResult, 1), lead: make(chan struct{})}
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

// RunShared runs fn as a shared call (TxCall.Shared, for a store's
// InGroupTx) and, should its group send it to run again, runs it with
// alone (the store's InTx).
func (g *Group) RunShared(ctx context.Context, fn func(tx store.Tx) error, commit func([]*TxCall) []TxResult,
	alone func(context.Context, func(store.Tx) error) error) error {
	err := g.Run(ctx, fn, true, commit)
	if errors.Is(err, ErrRunAlone) {
		return alone(ctx, fn)
	}
	return err
}

func (r TxResult) result() error {
	if r.Panic != nil {
		panic(r.Panic)
	}
	return r.Err
}

// runGroup runs the queued calls (up to Max) with commit, then hands
// leadership to the next waiter, if any.
func (g *Group) runGroup(commit func([]*TxCall) []TxResult) {
	g.mu.Lock()
	n := min(len(g.queue), max(g.Max, 1))
	group := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.mu.Unlock()

	results := commitOrPanic(commit, group)
	for i, call := range group {
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
func commitOrPanic(commit func([]*TxCall) []TxResult, group []*TxCall) (results []TxResult) {
	defer func() {
		if p := recover(); p != nil {
			results = make([]TxResult, len(group))
			for i := range results {
				results[i].Panic = p
			}
		}
	}()
	return commit(group)
}

// Call runs a call's Fn on tx, turning a panic into a result for its
// caller. A caller whose context ended meanwhile gets its context's error:
// its work must be rolled back, as a plain transaction's would be.
func (c *TxCall) Call(tx store.Tx) (r TxResult) {
	defer func() {
		if p := recover(); p != nil {
			r = TxResult{Panic: p}
		}
	}()
	err := c.Fn(tx)
	if err == nil {
		err = c.Ctx.Err()
	}
	return TxResult{Err: err}
}

// Failed reports whether the call's transaction must not commit.
func (r TxResult) Failed() bool { return r.Err != nil || r.Panic != nil }

// Fill sets err as the result of every call that has no outcome of its
// own yet (a group that failed as a whole).
func Fill(results []TxResult, err error) []TxResult {
	for i := range results {
		if !results[i].Failed() {
			results[i].Err = err
		}
	}
	return results
}

// RunAgain sends every call that has no outcome of its own yet to run
// again: the group was rolled back under them.
func RunAgain(results []TxResult) []TxResult { return Fill(results, ErrRunAlone) }

// RunAfter runs the AfterCommit functions (store.Tx) of a group's
// committed calls, call after call, in order. A function that panics ends
// its call's functions and becomes that call's result, as it would have
// been had the caller run them: the other calls' functions still run.
func RunAfter(after [][]func(), results []TxResult) []TxResult {
	for i, fns := range after {
		if p := RunAfterOne(fns); p != nil {
			results[i] = TxResult{Panic: p}
		}
	}
	return results
}

// RunAfterOne runs one transaction's AfterCommit functions in order and
// returns the panic of the one that panicked, if any.
func RunAfterOne(fns []func()) (panicked any) {
	defer func() { panicked = recover() }()
	for _, fn := range fns {
		fn()
	}
	return nil
}
