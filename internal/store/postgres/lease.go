package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// Lease times come from the database's clock (now(): the start of the
// statement's transaction), so that replicas whose clocks disagree still
// agree on when a lease expires. Each lease method outside a transaction is
// one statement, atomic on its own.

// The status changes the lease statements make, checked against the state
// table when the package loads.
var (
	acquireFrom, acquireTo = dbutil.Change(chat.Pending, chat.Running)
	recoverFrom, recoverTo = dbutil.Change(chat.Running, chat.Pending)
)

// AcquireChats takes up to max pending chats, oldest updated_at first, that
// no other transaction has locked (FOR UPDATE SKIP LOCKED), so concurrent
// acquirers never wait for each other nor take the same chat.
func (s *Store) AcquireChats(ctx context.Context, a store.Acquire) ([]chat.Chat, []store.Lease, error) {
	workerID, ttl, max := a.WorkerID, a.TTL, a.Max
	if err := dbutil.CheckAcquire(workerID, ttl, max); err != nil {
		return nil, nil, fmt.Errorf("acquire chats: %w", err)
	}
	rows, err := s.q.Query(ctx, `UPDATE chats
		SET status = `+acquireTo+`, worker_id = $1, lease_generation = lease_generation + 1,
			lease_expires_at = now() + $2::bigint * interval '1 microsecond', version = version + 1, updated_at = now()
		WHERE id IN (SELECT id FROM chats WHERE status = `+acquireFrom+`
			ORDER BY updated_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
		RETURNING `+chatColumns,
		workerID, ttl.Microseconds(), max)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire chats for %s: %w", workerID, err)
	}
	defer rows.Close()
	var chats []chat.Chat
	for rows.Next() {
		c, err := scanChat(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("acquire chats for %s: %w", workerID, err)
		}
		chats = append(chats, c)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("acquire chats for %s: %w", workerID, err)
	}
	return chats, dbutil.Leases(chats, workerID), nil
}

// RenewLease moves the lease's expiry to now+ttl if l still holds the chat;
// the conditional update waits for a transaction that holds the row and
// re-checks the lease after it.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (bool, error) {
	if err := dbutil.CheckRenew(l, ttl); err != nil {
		return false, fmt.Errorf("renew lease: %w", err)
	}
	var interrupt bool
	err := s.q.QueryRow(ctx, `UPDATE chats SET lease_expires_at = now() + $4::bigint * interval '1 microsecond'
		WHERE id = $1 AND status = 'running' AND worker_id = $2 AND lease_generation = $3
		RETURNING interrupt_requested`,
		l.ChatID, l.WorkerID, l.Generation, ttl.Microseconds()).Scan(&interrupt)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("renew lease of chat %s (generation %d): %w", l.ChatID, l.Generation, store.ErrLeaseLost)
	}
	if err != nil {
		return false, fmt.Errorf("renew lease of chat %s: %w", l.ChatID, err)
	}
	return interrupt, nil
}

// RecoverExpiredLeases hands every running chat whose lease expired back to
// pending. Rows another transaction holds (a worker's fenced write, another
// replica recovering them) are skipped, not waited for: a row whose lease
// is still expired is recovered on the next pass, and one that another
// replica recovered meanwhile no longer matches, so each chat is recovered
// once.
func (s *Store) RecoverExpiredLeases(ctx context.Context, count bool) ([]string, error) {
	rows, err := s.q.Query(ctx, `UPDATE chats
		SET status = `+recoverTo+`, worker_id = '', lease_expires_at = NULL,
			lease_recoveries = lease_recoveries + CASE WHEN $1::boolean THEN 1 ELSE 0 END,
			version = version + 1, updated_at = now()
		WHERE id IN (SELECT id FROM chats WHERE status = `+recoverFrom+` AND lease_expires_at < now()
			FOR UPDATE SKIP LOCKED)
		RETURNING id`, count)
	if err != nil {
		return nil, fmt.Errorf("recover expired leases: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("recover expired leases: %w", err)
	}
	return ids, nil
}

func (r reader) ExpiredActions(ctx context.Context, limit int) ([]store.Expired, error) {
	rows, err := r.q.Query(ctx, `SELECT id, action_deadline FROM chats
		WHERE status = 'requires_action' AND action_deadline <= now()
		ORDER BY action_deadline, id LIMIT $1`, dbutil.PageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("expired actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Expired, error) {
		var e store.Expired
		err := row.Scan(&e.ChatID, &e.Deadline)
		e.Deadline = e.Deadline.UTC()
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("expired actions: %w", err)
	}
	return out, nil
}

// Fence locks the chat's row (SELECT ... FOR UPDATE, in parley_fence) if l
// still holds it. It travels with the transaction's next round trip: a lost
// lease fails that statement, which stops the ones sent after it (the
// writes it guards) and reports ErrLeaseLost. A fence that waits for
// another transaction's lock re-checks the lease against the row as that
// transaction left it.
func (t *tx) Fence(ctx context.Context, l store.Lease) error {
	if err := dbutil.CheckLease(l); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	t.lazy.deferExec(func(_ pgconn.CommandTag, err error) error {
		var pe *pgconn.PgError
		switch {
		case errors.As(err, &pe) && pe.Code == leaseLost:
			return fmt.Errorf("fence chat %s (worker %s, generation %d): %w", l.ChatID, l.WorkerID, l.Generation, store.ErrLeaseLost)
		case err != nil:
			return fmt.Errorf("fence chat %s: %w", l.ChatID, err)
		}
		return nil
	}, `SELECT parley_fence($1, $2, $3)`, l.ChatID, l.WorkerID, l.Generation)
	return nil
}

// leaseLost is the SQLSTATE parley_fence raises when the lease is gone.
const leaseLost = "LEASE"

// ReserveMessageIDs takes n values of the messages id sequence.
func (s *Store) ReserveMessageIDs(ctx context.Context, n int) ([]int64, error) {
	if err := dbutil.CheckReserve(n); err != nil {
		return nil, err
	}
	rows, err := s.q.Query(ctx, `SELECT nextval(pg_get_serial_sequence('messages', 'id')) FROM generate_series(1, $1)`, n)
	if err != nil {
		return nil, fmt.Errorf("reserve message ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("reserve message ids: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

func (r reader) HasPending(ctx context.Context) (bool, error) {
	var pending bool
	if err := r.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM chats WHERE status = 'pending')`).Scan(&pending); err != nil {
		return false, fmt.Errorf("look for pending chats: %w", err)
	}
	return pending, nil
}
