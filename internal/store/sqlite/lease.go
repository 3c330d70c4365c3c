package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// Leases are written by one statement each, in a transaction of the commit
// group: the single writer serializes them with every transaction, which is
// what FOR UPDATE SKIP LOCKED achieves on PostgreSQL. Their times come from this process's
// clock, the only one that writes the file. Like InTx, they must not be
// called from inside an InTx fn.

// The status changes the lease statements make, checked against the state
// table when the package loads.
var (
	acquireFrom, acquireTo = dbutil.Change(chat.Pending, chat.Running)
	recoverFrom, recoverTo = dbutil.Change(chat.Running, chat.Pending)
)

// acquireSQL moves up to a.Max pending chats to running under new leases,
// fairly across owners. ownerQueues walks the owners that have pending
// chats one index probe each (a skip scan of chats_pending_owner), so that
// its cost follows the number of owners, not of pending chats. For each
// owner, slots holds its running count, its max_running (the quotas'
// override, else the default; 0: unlimited) and its horizon: the
// updated_at of its a.Max-th pending chat, past which none of its chats
// can be taken. Each chat within the horizon is ranked by its owner's
// running count plus its place in the owner's queue (oldest updated_at
// first), so the chats of the owners with the fewest running come first,
// counting the ones this statement takes; a chat whose rank passes its
// owner's max_running is not taken. The arguments are a.MaxRunning, a.Max,
// the worker, the expiry, the time, a.Max.
var acquireSQL = `WITH RECURSIVE ownerQueues(owner) AS (
		SELECT (SELECT owner FROM chats WHERE status = ` + acquireFrom + ` ORDER BY owner LIMIT 1)
		UNION ALL
		SELECT (SELECT c.owner FROM chats c WHERE c.status = ` + acquireFrom + ` AND c.owner > o.owner
			ORDER BY c.owner LIMIT 1)
		FROM ownerQueues o WHERE o.owner IS NOT NULL
	),
	slots AS MATERIALIZED (
		SELECT o.owner,
			(SELECT count(*) FROM chats WHERE status = 'running' AND owner = o.owner) AS running,
			coalesce((SELECT json_extract(q.overrides, '$.max_running') FROM owner_quotas q
				WHERE q.owner = o.owner), ?) AS max_running,
			coalesce((SELECT updated_at FROM chats WHERE status = ` + acquireFrom + ` AND owner = o.owner
				ORDER BY updated_at, id LIMIT 1 OFFSET ? - 1), 9223372036854775807) AS horizon
		FROM ownerQueues o WHERE o.owner IS NOT NULL
	),
	ranked AS (
		SELECT c.id, c.updated_at, s.max_running,
			s.running + row_number() OVER (PARTITION BY c.owner ORDER BY c.updated_at, c.id) AS rank
		FROM slots s CROSS JOIN chats c ON c.status = ` + acquireFrom + ` AND c.owner = s.owner AND c.updated_at <= s.horizon
	)
	UPDATE chats
	SET status = ` + acquireTo + `, worker_id = ?, lease_generation = lease_generation + 1,
		lease_expires_at = ?, version = version + 1, updated_at = ?
	WHERE id IN (SELECT id FROM ranked WHERE max_running = 0 OR rank <= max_running
		ORDER BY rank, updated_at, id LIMIT ?)
	RETURNING ` + dbutil.ChatColumns

// AcquireChats moves up to a.Max pending chats to running under new leases
// of a.WorkerID, fairly across owners and within each owner's max_running
// (acquireSQL); the single writer keeps concurrent acquirers from both
// counting the same free slots.
func (s *Store) AcquireChats(ctx context.Context, a store.Acquire) ([]chat.Chat, []store.Lease, error) {
	workerID, ttl, max := a.WorkerID, a.TTL, a.Max
	if err := dbutil.CheckAcquire(a); err != nil {
		return nil, nil, fmt.Errorf("acquire chats: %w", err)
	}
	var chats []chat.Chat
	err := s.writeOne(ctx, func(q querier) error {
		chats = nil
		now := dbutil.Now()
		rows, err := q.QueryContext(ctx, acquireSQL,
			a.MaxRunning, max, workerID, dbutil.Micros(now.Add(ttl)), dbutil.Micros(now), max)
		if err != nil {
			return err
		}
		defer rows.Close()
		chats, err = dbutil.Collect(rows, dbutil.ScanChat)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("acquire chats for %s: %w", workerID, err)
	}
	return chats, dbutil.Leases(chats, workerID), nil
}

// RenewLease moves the lease's expiry to now+ttl if l still holds the chat.
func (s *Store) RenewLease(ctx context.Context, l store.Lease, ttl time.Duration) (bool, error) {
	if err := dbutil.CheckRenew(l, ttl); err != nil {
		return false, fmt.Errorf("renew lease: %w", err)
	}
	var interrupt bool
	err := s.writeOne(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, `UPDATE chats SET lease_expires_at = ?
			WHERE id = ? AND status = 'running' AND worker_id = ? AND lease_generation = ?
			RETURNING interrupt_requested`,
			dbutil.Micros(dbutil.Now().Add(ttl)), l.ChatID, l.WorkerID, l.Generation).Scan(&interrupt)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("renew lease of chat %s (generation %d): %w", l.ChatID, l.Generation, store.ErrLeaseLost)
	}
	if err != nil {
		return false, fmt.Errorf("renew lease of chat %s: %w", l.ChatID, err)
	}
	return interrupt, nil
}

// RecoverExpiredLeases hands every running chat whose lease expired back to
// pending, in one statement.
func (s *Store) RecoverExpiredLeases(ctx context.Context, count bool) ([]string, error) {
	var ids []string
	err := s.writeOne(ctx, func(q querier) error {
		now := dbutil.Micros(dbutil.Now())
		rows, err := q.QueryContext(ctx, `UPDATE chats
			SET status = `+recoverTo+`, worker_id = '', lease_expires_at = NULL, lease_recoveries = lease_recoveries + ?,
				version = version + 1, updated_at = ?
			WHERE status = `+recoverFrom+` AND lease_expires_at < ?
			RETURNING id`, recovered(count), now, now)
		if err != nil {
			return err
		}
		defer rows.Close()
		ids, err = dbutil.Collect(rows, dbutil.ScanString)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recover expired leases: %w", err)
	}
	return ids, nil
}

// recovered is what a recovery adds to a chat's lease_recoveries.
func recovered(count bool) int {
	if count {
		return 1
	}
	return 0
}

// writeOne runs fn's statements in a transaction of the commit group, so
// single writes share a commit with the transactions around them.
func (s *Store) writeOne(ctx context.Context, fn func(q querier) error) error {
	return s.InTx(ctx, func(t store.Tx) error { return fn(t.(*tx).q) })
}

func (r reader) ExpiredActions(ctx context.Context, limit int) ([]store.Expired, error) {
	out, err := queryAll(ctx, r.q, dbutil.ScanExpired, `SELECT id, action_deadline FROM chats
		WHERE status = 'requires_action' AND action_deadline <= ?
		ORDER BY action_deadline, id LIMIT ?`, dbutil.Micros(dbutil.Now()), dbutil.PageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("expired actions: %w", err)
	}
	return out, nil
}

// Fence checks that l still holds the chat; the transaction (on the one
// writer connection) already excludes every other writer until it ends.
func (t *tx) Fence(ctx context.Context, l store.Lease) error {
	if err := dbutil.CheckLease(l); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	var one int
	err := t.q.QueryRowContext(ctx, `SELECT 1 FROM chats
		WHERE id = ? AND status = 'running' AND worker_id = ? AND lease_generation = ?`,
		l.ChatID, l.WorkerID, l.Generation).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("fence chat %s (worker %s, generation %d): %w", l.ChatID, l.WorkerID, l.Generation, store.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("fence chat %s: %w", l.ChatID, err)
	}
	return nil
}

// ReserveMessageIDs advances the messages table's AUTOINCREMENT counter by n
// and returns the ids it passed over.
func (s *Store) ReserveMessageIDs(ctx context.Context, n int) ([]int64, error) {
	if err := dbutil.CheckReserve(n); err != nil {
		return nil, err
	}
	var last int64
	err := s.writeOne(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq)
			SELECT 'messages', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'messages')`); err != nil {
			return err
		}
		return q.QueryRowContext(ctx, `UPDATE sqlite_sequence SET seq = seq + ? WHERE name = 'messages' RETURNING seq`, n).Scan(&last)
	})
	if err != nil {
		return nil, fmt.Errorf("reserve message ids: %w", err)
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = last - int64(n-1-i)
	}
	return ids, nil
}

func (r reader) HasPending(ctx context.Context) (bool, error) {
	var pending bool
	if err := r.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM chats WHERE status = 'pending')`).Scan(&pending); err != nil {
		return false, fmt.Errorf("look for pending chats: %w", err)
	}
	return pending, nil
}
