package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is a transaction whose BEGIN travels in one round trip with its
// first statement (a batch of the two), and whose notifications travel with
// its COMMIT, instead of round trips of their own: a worker's write is a
// handful of statements, so that is a good share of its latency.
type lazyTx struct {
	conn  *pgxpool.Conn
	begun bool
	// Notifications queued for the commit: channels[i] gets payloads[i].
	channels, payloads []string
}

// notifySQL sends queued notifications in their order.
const notifySQL = `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(c, p, i) ORDER BY i`

var _ querier = (*lazyTx)(nil)

// first sends BEGIN and the transaction's first statement together.
func (t *lazyTx) first(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	t.begun = true
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sql, args...)
	br := t.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	return br, nil
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun {
		return t.conn.Exec(ctx, sql, args...)
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer br.Close()
	return br.Exec()
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun {
		return t.conn.Query(ctx, sql, args...)
	}
	br, err := t.first(ctx, sql, args)
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
	if t.begun {
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

// rollback rolls the transaction back, if it ever began; its notifications
// are dropped.
func (t *lazyTx) rollback(ctx context.Context) error {
	t.channels, t.payloads = nil, nil
	if !t.begun {
		return nil
	}
	t.begun = false
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

// commit sends the queued notifications and COMMIT in one round trip. A
// transaction that ran no statement has nothing to commit, but its
// notifications are still sent.
func (t *lazyTx) commit(ctx context.Context) error {
	b := &pgx.Batch{}
	if len(t.channels) > 0 {
		b.Queue(notifySQL, t.channels, t.payloads)
	}
	if t.begun {
		b.Queue("COMMIT")
	}
	if b.Len() == 0 {
		return nil
	}
	br := t.conn.SendBatch(ctx, b)
	defer br.Close()
	if len(t.channels) > 0 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("notify: %w", err) // the transaction is left to roll back
		}
		t.channels, t.payloads = nil, nil
	}
	if !t.begun {
		return nil
	}
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
