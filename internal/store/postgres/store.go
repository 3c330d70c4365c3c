// Package postgres is the scale-out store.Store: any number of parley
// replicas share one PostgreSQL database through a pgx connection pool.
//
// Transactions run at READ COMMITTED. LockChat takes the chat's row lock
// (SELECT ... FOR UPDATE) and conditional updates re-check their condition
// after waiting for a lock, so flows that lock first are serialized per chat.
// InTx retries a transaction that failed on a serialization failure or a
// deadlock.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/parleyhq/parley/internal/pubsub"
	pgpubsub "github.com/parleyhq/parley/internal/pubsub/postgres"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// maxAttempts bounds how often InTx runs fn when the database asks for a
// retry or the connection failed before the commit.
const maxAttempts = 5

// Store is the PostgreSQL store.Store.
type Store struct {
	reader
	pool *pgxpool.Pool
	q    querier // the pool, its connection failures reported as store.ErrUnavailable
}

var _ store.Store = (*Store)(nil)

// Open connects a pool to the database of dsn (a postgres:// URL or
// key=value string; pool settings such as pool_max_conns may be part of it)
// and checks that it answers. It does not migrate: call Migrate.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres %s: %w", cfg.ConnConfig.Host, err)
	}
	s := &Store{reader: reader{q: unavailableMapper{pool}}, pool: pool, q: unavailableMapper{pool}}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Pool returns the connection pool, for the PostgreSQL pubsub to share.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", err)
	}
	return nil
}

// Close closes the pool, waiting for connections in use to be released.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// InTx runs fn in one transaction, and again (up to maxAttempts in all) when
// the transaction fails with a serialization failure or a deadlock, or
// because the connection failed before the commit was sent (the database
// then rolled it back: nothing was written). A connection that fails during
// the commit leaves its outcome unknown: that is not tried again, and the
// error, like every connection failure, wraps store.ErrUnavailable.
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	for attempt := 1; ; attempt++ {
		committing, err := s.runTx(ctx, fn)
		if err == nil {
			return nil
		}
		lost := unavailable(err) && !committing
		if attempt == maxAttempts || !(retryable(err) || lost) || ctx.Err() != nil {
			return markUnavailable(err)
		}
		// A short, growing, jittered pause lets the competing transaction
		// finish (or the database come back) before this one runs again.
		pause := time.Duration(attempt)*5*time.Millisecond + rand.N(5*time.Millisecond)
		if lost {
			pause *= 4
		}
		select {
		case <-ctx.Done():
			return errors.Join(markUnavailable(err), ctx.Err())
		case <-time.After(pause):
		}
	}
}

// runTx is one attempt of InTx; committing reports that it failed in its
// commit.
func (s *Store) runTx(ctx context.Context, fn func(tx store.Tx) error) (committing bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("begin transaction: %w", err)
	}
	defer conn.Release() // a connection left inside a transaction is closed, not reused
	t := &lazyTx{conn: conn}
	rollback := func() error {
		// The rollback must happen even when ctx is what failed fn.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return t.rollback(ctx)
	}
	// Should fn panic, this ends the transaction; after a commit or a
	// rollback it does nothing.
	defer rollback()
	tx := &tx{reader: reader{q: t}, lazy: t}
	if err := fn(tx); err != nil {
		if rbErr := rollback(); rbErr != nil && !unavailable(rbErr) {
			return false, errors.Join(err, fmt.Errorf("roll back: %w", rbErr))
		}
		return false, err
	}
	if err := t.commit(ctx); err != nil {
		return true, fmt.Errorf("commit: %w", err)
	}
	if p := dbutil.RunAfterOne(tx.after); p != nil {
		panic(p)
	}
	return false, nil
}

// retryable reports whether err is a failure that running the transaction
// again may cure: serialization_failure (40001) or deadlock_detected (40P01).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// querier is what reader needs of the pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// reader runs the store.Reader queries on the pool or inside a transaction.
type reader struct{ q querier }

// tx is the store.Tx of one InTx attempt. It is a pubsub.Outbox: the
// notifications queued in it are sent with its COMMIT.
type tx struct {
	reader
	lazy  *lazyTx
	after []func() // AfterCommit's functions
}

func (t *tx) AfterCommit(fn func()) { t.after = append(t.after, fn) }

var (
	_ store.Tx      = (*tx)(nil)
	_ pubsub.Outbox = (*tx)(nil)
)

// Notify queues a notification sent when the transaction commits.
func (t *tx) Notify(channel, payload string) { t.lazy.notify(channel, payload) }

// StorePayload stores a payload too large for a notification in the
// pubsub_payloads table, within the transaction.
func (t *tx) StorePayload(ctx context.Context, payload []byte) (int64, error) {
	return pgpubsub.StorePayload(ctx, t.q, payload)
}
