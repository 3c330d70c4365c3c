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

// acquireLockKey is the first key of the transaction advisory lock that
// AcquireChats holds; the second is the hash of the schema, as Migrate's.
const acquireLockKey = 0x61637172 // "acqr"

// acquireMargin is how many of the best candidates beyond a.Max
// AcquireChats looks at to make up for chats other transactions hold (a
// message being posted); past that, it takes fewer than it could and the
// rest waits for the next acquisition.
const acquireMargin = "32"

// acquireSQL moves up to $3 pending chats to running under leases of
// worker $1 for $2 microseconds, fairly across owners. ownerQueues walks
// the owners that have pending chats one index probe each (a loose scan of
// chats_pending_owner), so that its cost follows the number of owners, not
// of pending chats. For each owner, slots is how many chats it may still
// start: its max_running (its quotas' override, else $4; 0: unlimited)
// less its running chats, and at most $3. candidates are each owner's
// oldest pending chats within its slots, ranked by the owner's running
// count plus the chat's place in its queue: the chats of the owners with
// the fewest running come first, counting the ones this statement takes.
// picked locks the best $3, skipping rows other transactions hold, out of
// the best $3 + acquireMargin: only those are looked up again to be locked.
var acquireSQL = `WITH RECURSIVE ownerQueues AS (
		(SELECT owner FROM chats WHERE status = ` + acquireFrom + ` ORDER BY owner LIMIT 1)
		UNION ALL
		SELECT (SELECT c.owner FROM chats c WHERE c.status = ` + acquireFrom + ` AND c.owner > o.owner
			ORDER BY c.owner LIMIT 1)
		FROM ownerQueues o WHERE o.owner IS NOT NULL
	),
	slots AS MATERIALIZED (
		SELECT o.owner, r.running, CASE WHEN l.max_running = 0 THEN $3
			ELSE least(greatest(l.max_running - r.running, 0), $3) END AS free
		FROM ownerQueues o
		LEFT JOIN owner_quotas q ON q.owner = o.owner
		CROSS JOIN LATERAL (SELECT coalesce((q.overrides->>'max_running')::bigint, $4::bigint) AS max_running) l
		CROSS JOIN LATERAL (SELECT count(*) AS running FROM chats
			WHERE status = 'running' AND owner = o.owner) r
		WHERE o.owner IS NOT NULL
	),
	candidates AS (
		SELECT p.id, p.updated_at, s.running + p.place AS rank
		FROM slots s
		CROSS JOIN LATERAL (SELECT c.id, c.updated_at, row_number() OVER (ORDER BY c.updated_at, c.id) AS place
			FROM chats c WHERE c.status = ` + acquireFrom + ` AND c.owner = s.owner
			ORDER BY c.updated_at, c.id LIMIT s.free) p
		WHERE s.free > 0
	),
	best AS (
		SELECT * FROM candidates ORDER BY rank, updated_at, id LIMIT $3 + ` + acquireMargin + `
	),
	picked AS (
		SELECT c.id FROM best k JOIN chats c ON c.id = k.id
		WHERE c.status = ` + acquireFrom + `
		ORDER BY k.rank, k.updated_at, k.id LIMIT $3
		FOR UPDATE OF c SKIP LOCKED
	)
	UPDATE chats
	SET status = ` + acquireTo + `, worker_id = $1, lease_generation = lease_generation + 1,
		lease_expires_at = now() + $2::bigint * interval '1 microsecond', version = version + 1, updated_at = now()
	WHERE id IN (SELECT id FROM picked)
	RETURNING ` + dbutil.ChatColumns

// AcquireChats takes up to a.Max pending chats, fairly across owners and
// within each owner's max_running (acquireSQL), skipping those another
// transaction has locked (FOR UPDATE SKIP LOCKED), so concurrent acquirers
// never wait for a chat's row nor take the same chat.
//
// The caps need more than row locks. Two acquirers whose snapshots are
// taken at once both count the same free slots; mostly they then race for
// the same oldest chats and the loser finds them gone, but not always: if
// the owner's queue changed between their snapshots (an edit of a pending
// chat's title moves it to the back), they pick different chats and
// between them start more than max_running. So acquirers take turns on an
// advisory lock taken in a statement of its own before the query: under
// READ COMMITTED the query's snapshot starts after the lock is granted, so
// it sees every chat the previous holder started. The lock travels in the
// same round trip as the query and is held for the length of one statement.
func (s *Store) AcquireChats(ctx context.Context, a store.Acquire) ([]chat.Chat, []store.Lease, error) {
	workerID := a.WorkerID
	if err := dbutil.CheckAcquire(a); err != nil {
		return nil, nil, fmt.Errorf("acquire chats: %w", err)
	}
	chats, err := s.acquire(ctx, a)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire chats for %s: %w", workerID, markUnavailable(err))
	}
	return chats, dbutil.Leases(chats, workerID), nil
}

// acquire runs acquireSQL in a transaction of its own, after the lock.
func (s *Store) acquire(ctx context.Context, a store.Acquire) ([]chat.Chat, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	defer conn.Release() // a connection left inside a transaction is closed, not reused
	t := &lazyTx{conn: conn}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		t.rollback(ctx) // after the commit: nothing to do
	}()
	t.deferExec(func(_ pgconn.CommandTag, err error) error {
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		return nil
	}, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`, acquireLockKey)
	rows, err := t.Query(ctx, acquireSQL, a.WorkerID, a.TTL.Microseconds(), a.Max, a.MaxRunning)
	if err != nil {
		return nil, err
	}
	chats, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (chat.Chat, error) { return dbutil.ScanChat(row) })
	if err != nil {
		return nil, err
	}
	if err := t.commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return chats, nil
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
	out, err := queryAll(ctx, r.q, dbutil.ScanExpired, `SELECT id, action_deadline FROM chats
		WHERE status = 'requires_action' AND action_deadline <= now()
		ORDER BY action_deadline, id LIMIT $1`, dbutil.PageLimit(limit))
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
