package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/parleyhq/parley/internal/store"
)

// maxGroup bounds how many transactions share one commit.
const maxGroup = 64

// Group commit: SQLite has one writer, and what a small transaction costs
// is mostly its BEGIN and COMMIT (locks and the write to the WAL). So
// transactions that arrive while another runs wait in a queue, and the
// first of them (the leader) runs the whole queue as one database
// transaction, each caller's function inside a savepoint of its own: a
// function that fails rolls back to its savepoint, the others commit
// together, and every caller gets its own result once the commit is done.
// Leadership passes to the next waiter after each group, so no caller runs
// other callers' work for long.

// txReq is one InTx call waiting to run.
type txReq struct {
	ctx  context.Context
	fn   func(tx store.Tx) error
	done chan txResult // the result, once the group committed
	lead chan struct{} // closed when this caller must lead the next group
}

type txResult struct {
	err   error
	panic any // a panic of fn, raised again in its caller
}

// groupCommit queues InTx calls and runs them in groups.
type groupCommit struct {
	mu      sync.Mutex
	queue   []*txReq
	leading bool // a caller is running a group
}

// InTx runs fn in a transaction on the writer connection, sharing its
// commit with the transactions queued meanwhile. It must not be called from
// inside fn: the writer is taken.
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &txReq{ctx: ctx, fn: fn, done: make(chan txResult, 1), lead: make(chan struct{})}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, req)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if !lead {
		select {
		case r := <-req.done:
			return r.result()
		case <-req.lead:
		}
	}
	s.runGroup()
	r := <-req.done
	return r.result()
}

func (r txResult) result() error {
	if r.panic != nil {
		panic(r.panic)
	}
	return r.err
}

// runGroup runs the queued calls (up to maxGroup) as one transaction, then
// hands leadership to the next waiter, if any.
func (s *Store) runGroup() {
	g := &s.group
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	group := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.mu.Unlock()

	results := s.commitGroup(group)
	for i, req := range group {
		req.done <- results[i]
	}

	g.mu.Lock()
	if len(g.queue) == 0 {
		g.leading = false
	} else {
		close(g.queue[0].lead)
	}
	g.mu.Unlock()
}

// commitGroup runs each call's fn in a savepoint of one transaction and
// commits it.
func (s *Store) commitGroup(group []*txReq) []txResult {
	results := make([]txResult, len(group))
	fail := func(err error) []txResult {
		for i := range results {
			if results[i].panic == nil {
				results[i].err = err
			}
		}
		return results
	}
	// Not the callers' contexts: one caller giving up must not roll back the
	// others' work. Each fn runs its statements with its own context.
	sqlTx, err := s.write.BeginTx(context.Background(), nil)
	if err != nil {
		return fail(fmt.Errorf("begin transaction: %w", err))
	}
	defer sqlTx.Rollback() // after a commit it does nothing
	tx := &tx{reader{q: cached{c: s.writeStmts, tx: sqlTx}}}
	single := len(group) == 1 // no savepoint needed
	for i, req := range group {
		if !single {
			if _, err := sqlTx.Exec("SAVEPOINT g"); err != nil {
				return fail(fmt.Errorf("savepoint: %w", err))
			}
		}
		results[i] = callFn(req, tx)
		if single {
			break
		}
		if results[i].err != nil || results[i].panic != nil {
			if _, err := sqlTx.Exec("ROLLBACK TO g"); err != nil {
				// SQLite rolled back the whole transaction (an I/O error, a full
				// disk): nothing of the group stands.
				return fail(fmt.Errorf("roll back to savepoint: %w", err))
			}
		}
		if _, err := sqlTx.Exec("RELEASE g"); err != nil {
			return fail(fmt.Errorf("release savepoint: %w", err))
		}
	}
	if single && (results[0].err != nil || results[0].panic != nil) {
		if err := sqlTx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			results[0].err = errors.Join(results[0].err, fmt.Errorf("roll back: %w", err))
		}
		return results
	}
	if err := sqlTx.Commit(); err != nil {
		for i := range results {
			if results[i].err == nil && results[i].panic == nil {
				results[i].err = fmt.Errorf("commit: %w", err)
			}
		}
		return results
	}
	s.writeStmts.prepareWanted(context.Background())
	return results
}

// callFn runs a call's fn, turning a panic into a result for its caller. A
// caller whose context ended meanwhile gets its context's error: its work
// is rolled back, as a plain transaction's would be.
func callFn(req *txReq, tx *tx) (r txResult) {
	defer func() {
		if p := recover(); p != nil {
			r = txResult{panic: p}
		}
	}()
	err := req.fn(tx)
	if err == nil {
		err = req.ctx.Err()
	}
	return txResult{err: err}
}
