package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// maxGroup bounds how many InGroupTx calls share one transaction.
const maxGroup = 32

// InGroupTx runs fn like InTx, in one transaction with the InGroupTx calls
// that arrived while the previous group ran (dbutil.Group): the group
// shares its BEGIN, its COMMIT with the wait for the disk, and its
// notifications' delivery. Workers' fenced writes come through here; each
// writes only the chat its lease holds, so groups wait for each other only
// when leases changed hands meanwhile (a deadlock PostgreSQL breaks, after
// which the calls run alone). Should a call of a group fail, the group is
// rolled back: the failed call gets its error, and every other call runs
// again in a transaction of its own.
func (s *Store) InGroupTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.group.RunShared(ctx, fn, s.commitGroup, s.InTx)
}

// commitGroup runs a group's calls one after the other in one transaction
// and commits it. With savepoints, one call's failure could be undone
// alone, but every call would pay two more statements; failures are rare
// (a lost lease), so a failure sends the whole group to run call by call.
func (s *Store) commitGroup(group []*dbutil.TxCall) []dbutil.TxResult {
	results := make([]dbutil.TxResult, len(group))
	if len(group) == 1 {
		results[0] = runAlone(s, group[0])
		return results
	}
	// Not the callers' contexts: one caller giving up must not roll back the
	// others' work. Each fn runs its statements with its own context.
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return dbutil.Fill(results, fmt.Errorf("begin transaction: %w", err))
	}
	defer conn.Release() // a connection left inside a transaction is closed, not reused
	t := &lazyTx{conn: conn}
	defer t.rollback(ctx) // after the commit it does nothing
	// alone rolls the group back and sends every call that has no outcome of
	// its own yet to run alone.
	alone := func() []dbutil.TxResult {
		if err := t.rollback(ctx); err != nil {
			conn.Conn().Close(ctx) // never reuse a connection in an unknown state
		}
		return dbutil.RunAgain(results)
	}
	after := make([][]func(), len(group)) // each call's AfterCommit functions
	wrote := false                        // a call before this one wrote
	for i, call := range group {
		if err := call.Ctx.Err(); err != nil {
			results[i].Err = err // its caller gave up: it never ran
			continue
		}
		tx := &tx{reader: reader{q: t}, lazy: t}
		results[i] = call.Call(tx)
		after[i] = tx.after
		// What the call left for later (rare: a fenced write ends with a
		// statement that needs an answer) is sent now, before the next call.
		if !results[i].Failed() && (t.held != nil || len(t.deferred) > 0) {
			results[i].Err = t.flush(call.Ctx)
		}
		if r := results[i]; r.Failed() {
			// The failure is its own unless the database asks for the whole
			// to run again, or it ran after other calls' writes (which may
			// have caused it, and may now never commit).
			results[i] = dbutil.TxResult{}
			alone()
			if r.Panic != nil || (!wrote && !retryable(r.Err)) {
				results[i] = r
			}
			return results
		}
		wrote = true
	}
	if err := t.commit(ctx); err != nil {
		if retryable(err) {
			return alone()
		}
		return dbutil.Fill(results, fmt.Errorf("commit: %w", err))
	}
	return dbutil.RunAfter(after, results)
}

// groupTimeout bounds a group's transaction.
const groupTimeout = time.Minute

// runAlone runs one call in a transaction of its own (InTx: retried on a
// deadlock or a serialization failure), turning a panic into its result.
func runAlone(s *Store, call *dbutil.TxCall) (r dbutil.TxResult) {
	defer func() {
		if p := recover(); p != nil {
			r = dbutil.TxResult{Panic: p}
		}
	}()
	return dbutil.TxResult{Err: s.InTx(call.Ctx, call.Fn)}
}
