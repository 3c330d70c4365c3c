package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is a transaction that spends as few round trips as it can: its
// BEGIN travels with its first statement, a statement whose caller needs no
// answer right away (deferExec) travels with the next one that does, and
// its notifications and deferred statements travel with its COMMIT. A
// worker's write is a handful of statements, so round trips are a good
// share of its cost. A deferred statement's failure is reported by the
// statement (or the commit) it travelled with.
type lazyTx struct {
	conn  *pgxpool.Conn
	begun bool
	// Statements waiting for the next round trip, in order.
	deferred []deferred
	// Notifications queued for the commit: channels[i] gets payloads[i].
	channels, payloads []string
}

// deferred is a statement sent later; check turns its outcome into the
// error its caller would have got.
type deferred struct {
	sql   string
	args  []any
	check func(pgconn.CommandTag, error) error
}

// notifySQL sends queued notifications in their order.
const notifySQL = `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(c, p, i) ORDER BY i`

var _ querier = (*lazyTx)(nil)

// deferExec queues a statement to travel with the transaction's next round
// trip; check reports its failure there.
func (t *lazyTx) deferExec(check func(pgconn.CommandTag, error) error, sql string, args ...any) {
	t.deferred = append(t.deferred, deferred{sql: sql, args: args, check: check})
}

// send sends what waits (BEGIN, deferred statements) and then sql, in one
// batch, and returns the batch positioned at sql's result. The caller
// closes it.
func (t *lazyTx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	begin := !t.begun
	if begin {
		b.Queue("BEGIN")
	}
	waiting := t.deferred
	t.deferred = nil
	for _, d := range waiting {
		b.Queue(d.sql, d.args...)
	}
	if sql != "" {
		b.Queue(sql, args...)
	}
	t.begun = true
	br := t.conn.SendBatch(ctx, b)
	if begin {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("begin transaction: %w", err)
		}
	}
	for _, d := range waiting {
		if err := d.check(br.Exec()); err != nil {
			br.Close()
			return nil, err
		}
	}
	return br, nil
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun && len(t.deferred) == 0 {
		return t.conn.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer br.Close()
	return br.Exec()
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun && len(t.deferred) == 0 {
		return t.conn.Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return batchRows{Rows: rows, br: br}, nil
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.begun && len(t.deferred) == 0 {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := t.Query(ctx, sql, args...)
	return lazyRow{rows: rows, err: err}
}

// notify queues a notification for the commit.
func (t *lazyTx) notify(channel, payload string) {
	t.channels = append(t.channels, channel)
	t.payloads = append(t.payloads, payload)
}

// rollback rolls the transaction back, if it ever began; its deferred
// statements and notifications are dropped.
func (t *lazyTx) rollback(ctx context.Context) error {
	t.deferred, t.channels, t.payloads = nil, nil, nil
	if !t.begun {
		return nil
	}
	t.begun = false
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

// commit sends the deferred statements, the queued notifications and COMMIT
// in one round trip. A transaction that ran no statement has nothing to
// commit, but its notifications are still sent.
func (t *lazyTx) commit(ctx context.Context) error {
	if len(t.channels) > 0 {
		t.deferExec(func(_ pgconn.CommandTag, err error) error {
			if err != nil {
				return fmt.Errorf("notify: %w", err)
			}
			return nil
		}, notifySQL, t.channels, t.payloads)
		t.channels, t.payloads = nil, nil
	}
	switch {
	case t.begun || len(t.deferred) > 1:
		// COMMIT after BEGIN (send adds it when the transaction has not begun).
	case len(t.deferred) == 1: // one statement alone is a transaction of its own
		d := t.deferred[0]
		t.deferred = nil
		return d.check(t.conn.Exec(ctx, d.sql, d.args...))
	default:
		return nil
	}
	br, err := t.send(ctx, "COMMIT", nil)
	if err != nil {
		return err // the transaction is left to roll back
	}
	defer br.Close()
	tag, err := br.Exec()
	if err != nil {
		return err
	}
	t.begun = false
	if tag.String() == "ROLLBACK" { // a statement failed and fn went on
		return errors.New("the transaction was rolled back: a statement in it failed")
	}
	return nil
}

// batchRows closes its batch when its rows are closed.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r batchRows) Close() {
	r.Rows.Close()
	r.br.Close()
}

// lazyRow is QueryRow's answer over rows: the first row, or pgx.ErrNoRows.
type lazyRow struct {
	rows pgx.Rows
	err  error
}

func (r lazyRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
