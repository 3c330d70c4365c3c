package sqlite

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/store"
)

// maxGroup bounds how many transactions share one commit.
const maxGroup = 64

// Group commit: SQLite has one writer, and what a small transaction costs
// is mostly its BEGIN and COMMIT (locks and the write to the WAL). So every
// transaction joins a group (batch.Batcher), run as one database transaction, in which
// each caller's function runs inside a savepoint of its own: a function
// that fails rolls back to its savepoint, the others commit together, and
// every caller gets its own result once the commit is done. A group of one
// needs no savepoint.

// InTx runs fn in a transaction on the writer connection, sharing its
// commit with the transactions queued meanwhile. It must not be called from
// inside fn: the writer is taken.
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := s.group.Do(&txCall{ctx: ctx, fn: fn})
	if err != nil {
		return err // the group's commit itself panicked
	}
	return r.result()
}

// commitGroup runs each call's fn in one transaction, each in a savepoint
// when there are several, and commits it.
func (s *Store) commitGroup(calls []*txCall) []txResult {
	results := make([]txResult, len(calls))
	fail := func(err error) []txResult { return fill(results, err) }
	// Not the callers' contexts: one caller giving up must not roll back the
	// others' work. A caller's statements cannot be cancelled either
	// (cached.statementContext); a caller whose context ended by the end of
	// its function is rolled back to its savepoint (txCall.call).
	sqlTx, err := s.write.BeginTx(context.Background(), nil)
	if err != nil {
		return fail(fmt.Errorf("begin transaction: %w", err))
	}
	defer sqlTx.Rollback() // after a commit it does nothing
	tx := &tx{reader: reader{q: cached{c: s.writeStmts, tx: sqlTx}}}
	after := make([][]func(), len(calls)) // each call's AfterCommit functions
	savepoints := len(calls) > 1
	for i, c := range calls {
		if err := c.ctx.Err(); err != nil && savepoints {
			results[i].err = err // its caller gave up: it never ran
			continue
		}
		if savepoints {
			if _, err := sqlTx.Exec("SAVEPOINT g"); err != nil {
				return fail(fmt.Errorf("savepoint: %w", err))
			}
		}
		tx.after = nil
		results[i] = c.call(tx)
		if !results[i].failed() {
			after[i] = tx.after
		}
		if !savepoints {
			break
		}
		if results[i].failed() {
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
	if !savepoints && results[0].failed() {
		return results // the deferred rollback undoes it
	}
	if err := sqlTx.Commit(); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	s.writeStmts.prepareWanted(context.Background())
	return runAfter(after, results)
}
