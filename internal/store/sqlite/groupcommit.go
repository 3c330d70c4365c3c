package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// maxGroup bounds how many transactions share one commit.
const maxGroup = 64

// Group commit: SQLite has one writer, and what a small transaction costs
// is mostly its BEGIN and COMMIT (locks and the write to the WAL). So every
// transaction joins a group (dbutil.Group), run as one database
// transaction. Each InTx caller's function runs inside a savepoint of its
// own: a function that fails rolls back to its savepoint, the others commit
// together, and every caller gets its own result once the commit is done.
// An InGroupTx caller's function (a worker's fenced write, which rarely
// fails) runs with no savepoint, two statements fewer; should it fail, the
// whole group rolls back, it gets its error, and the others run again.

// InTx runs fn in a transaction on the writer connection, sharing its
// commit with the transactions queued meanwhile (dbutil.Group). It must not
// be called from inside fn: the writer is taken.
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	for {
		err := s.group.Run(ctx, fn, false, s.commitGroup)
		if !errors.Is(err, dbutil.ErrRunAlone) {
			return err
		}
	}
}

// InGroupTx runs fn like InTx, in a group, but with no savepoint of its own
// (see above).
func (s *Store) InGroupTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.group.RunShared(ctx, fn, s.commitGroup, s.InTx)
}

// commitGroup runs each call's fn in one transaction (InTx calls each in a
// savepoint) and commits it.
func (s *Store) commitGroup(group []*dbutil.TxCall) []dbutil.TxResult {
	results := make([]dbutil.TxResult, len(group))
	fail := func(err error) []dbutil.TxResult { return dbutil.Fill(results, err) }
	// Not the callers' contexts: one caller giving up must not roll back the
	// others' work. Each fn runs its statements with its own context.
	sqlTx, err := s.write.BeginTx(context.Background(), nil)
	if err != nil {
		return fail(fmt.Errorf("begin transaction: %w", err))
	}
	defer sqlTx.Rollback() // after a commit it does nothing
	tx := &tx{reader: reader{q: cached{c: s.writeStmts, tx: sqlTx}}}
	after := make([][]func(), len(group)) // each call's AfterCommit functions
	single := len(group) == 1             // no savepoint needed
	wrote := false                        // a call before this one wrote
	for i, req := range group {
		if err := req.Ctx.Err(); err != nil && !single {
			results[i].Err = err // its caller gave up: it never ran
			continue
		}
		savepoint := !single && !req.Shared
		if savepoint {
			if _, err := sqlTx.Exec("SAVEPOINT g"); err != nil {
				return fail(fmt.Errorf("savepoint: %w", err))
			}
		}
		tx.after = nil
		results[i] = req.Call(tx)
		if !results[i].Failed() {
			after[i] = tx.after
		}
		if single {
			break
		}
		if r := results[i]; r.Failed() && !savepoint {
			// Nothing but the whole transaction undoes it, and the others run
			// again. The call keeps its outcome unless it ran after writes of
			// other calls, which may have caused it (and may now never
			// commit): then it runs again too.
			results[i] = dbutil.TxResult{}
			if err := sqlTx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
				results[i] = r
				return fail(fmt.Errorf("roll back: %w", err))
			}
			results = dbutil.RunAgain(results)
			if !wrote || r.Panic != nil {
				results[i] = r
			}
			return results
		}
		if !results[i].Failed() {
			wrote = true
		}
		if !savepoint {
			continue
		}
		if results[i].Failed() {
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
	if single && results[0].Failed() {
		if err := sqlTx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			results[0].Err = errors.Join(results[0].Err, fmt.Errorf("roll back: %w", err))
		}
		return results
	}
	if err := sqlTx.Commit(); err != nil {
		return fail(fmt.Errorf("commit: %w", err))
	}
	s.writeStmts.prepareWanted(context.Background())
	return dbutil.RunAfter(after, results)
}
