package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A worker's liveness is its database session: HoldLiveness keeps a
// session-level advisory lock, keyed by the worker id, on a connection of
// its own. When the worker's process dies, the kernel closes that
// connection, PostgreSQL ends the session and the lock is free at once:
// DeadWorkers sees it, and RecoverWorkers hands the worker's chats back to
// pending without waiting for their leases to expire. The lease stays the
// safety net for a process that hangs and a network partition (where
// PostgreSQL keeps the session until TCP gives up on it).

// livenessKey is the advisory lock key of a worker id, in SQL.
const livenessKey = `hashtextextended(%s, 0)`

// heldKeys is a CTE of the keys of the granted session-level advisory locks
// in the current database (pg_locks shows a 64-bit key's high half in
// classid, its low half in objid, and objsubid 1). It is materialized: read
// once per statement, since each read of pg_locks takes the lock manager's
// locks, and only when a running chat's worker is looked up.
const heldKeys = `held AS MATERIALIZED (SELECT (l.classid::bigint << 32) | l.objid::bigint AS key FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`

// heldLiveness is the condition, in SQL, that the worker of the row c holds
// its liveness lock (with heldKeys).
var heldLiveness = `EXISTS (SELECT 1 FROM held WHERE held.key = ` + fmt.Sprintf(livenessKey, "c.worker_id") + `)`

// livenessPing is how often the held session is checked; a session that
// PostgreSQL ended (the connection closed) is reported within about this
// long, one that stopped answering within livenessTimeout more. The
// timeout is not shorter: a ping slowed by a busy machine would stop every
// run of the worker.
const (
	livenessPing    = 200 * time.Millisecond
	livenessTimeout = 2 * time.Second
)

// HoldLiveness holds workerID's liveness on a session of its own: it
// connects, takes the lock, calls held, and checks the session every
// livenessPing until it is lost (an error: the worker must stop running
// chats at once, another replica may recover them) or ctx ends (nil; the
// session is closed and the lock freed).
func (s *Store) HoldLiveness(ctx context.Context, workerID string, held func()) error {
	connect, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(connect, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("liveness: connect: %w", err)
	}
	defer func() {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(closing) // ends the session, and frees the lock
	}()
	if _, err := conn.Exec(connect, `SELECT pg_advisory_lock(`+fmt.Sprintf(livenessKey, "$1")+`)`, workerID); err != nil {
		return fmt.Errorf("liveness: lock: %w", err)
	}
	held()
	tick := time.NewTicker(livenessPing)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		ping, cancel := context.WithTimeout(ctx, livenessTimeout)
		err := conn.Ping(ping)
		cancel()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("liveness: session lost: %w", err)
		}
	}
}

// DeadWorkers returns the workers of running chats that hold no liveness
// lock: their process died (or, for a worker of a build without liveness,
// never took one).
func (r reader) DeadWorkers(ctx context.Context) ([]string, error) {
	rows, err := r.q.Query(ctx, `WITH `+heldKeys+`,
		c AS (SELECT DISTINCT worker_id FROM chats WHERE status = 'running' AND worker_id <> '')
		SELECT c.worker_id FROM c WHERE NOT `+heldLiveness)
	if err != nil {
		return nil, fmt.Errorf("dead workers: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("dead workers: %w", err)
	}
	return ids, nil
}

// RecoverWorkers hands the running chats of workers back to pending, as
// RecoverExpiredLeases does for expired leases, if those workers still hold
// no liveness lock, and returns their ids. count says whether the recovery
// counts against the chats (see RecoverExpiredLeases).
func (s *Store) RecoverWorkers(ctx context.Context, workers []string, count bool) ([]string, error) {
	rows, err := s.q.Query(ctx, `WITH `+heldKeys+`
		UPDATE chats
		SET status = `+recoverTo+`, worker_id = '', lease_expires_at = NULL,
			lease_recoveries = lease_recoveries + CASE WHEN $2::boolean THEN 1 ELSE 0 END,
			version = version + 1, updated_at = now()
		WHERE id IN (SELECT c.id FROM chats c WHERE c.status = `+recoverFrom+` AND c.worker_id = ANY($1)
			AND NOT `+heldLiveness+` FOR UPDATE OF c SKIP LOCKED)
		RETURNING id`, workers, count)
	if err != nil {
		return nil, fmt.Errorf("recover chats of dead workers: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("recover chats of dead workers: %w", err)
	}
	return ids, nil
}
