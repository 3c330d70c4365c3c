package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// endpointColumns are the columns dbutil.ScanEndpoint reads, in its order
// (events as JSON, as SQLite keeps them).
const endpointColumns = `id, owner, url, to_json(events), description, secret, previous_secret,
	previous_secret_until, disabled, disabled_reason, failure_streak, created_at, updated_at`

// writeTx runs fn's statements in one transaction.
func (s *Store) writeTx(ctx context.Context, fn func(q querier) error) error {
	return s.InTx(ctx, func(t store.Tx) error { return fn(t.(*tx).q) })
}

func (s *Store) CreateWebhook(ctx context.Context, e *store.WebhookEndpoint, max int) error {
	err := s.InTx(ctx, func(stx store.Tx) error {
		t := stx.(*tx)
		if max > 0 {
			if err := t.LockOwner(ctx, e.Owner); err != nil {
				return err
			}
			var n int
			if err := t.q.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints WHERE owner = $1`, e.Owner).Scan(&n); err != nil {
				return err
			}
			if n >= max {
				return store.ErrCapReached
			}
		}
		return classify(t.q.QueryRow(ctx, `INSERT INTO webhook_endpoints (id, owner, url, events, description, secret, previous_secret,
				previous_secret_until, disabled, disabled_reason, failure_streak, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, '', NULL, $7, $8, 0, now(), now()) RETURNING created_at`,
			e.ID, e.Owner, e.URL, e.Events, e.Description, e.Secret, e.Disabled, e.DisabledReason).Scan(&e.CreatedAt))
	})
	if err != nil {
		return fmt.Errorf("create webhook %s: %w", e.ID, err)
	}
	e.CreatedAt = e.CreatedAt.UTC()
	e.UpdatedAt, e.FailureStreak = e.CreatedAt, 0
	return nil
}

func (s *Store) GetWebhook(ctx context.Context, owner, id string) (store.WebhookEndpoint, error) {
	return getEndpoint(ctx, s.q, owner, id, "")
}

// getEndpoint reads one of the owner's endpoints; lock is "" or a locking
// clause.
func getEndpoint(ctx context.Context, q querier, owner, id, lock string) (store.WebhookEndpoint, error) {
	e, err := dbutil.ScanEndpoint(q.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE id = $1 AND owner = $2 `+lock, id, owner))
	if err = notFound(err); err != nil {
		return e, fmt.Errorf("webhook %s: %w", id, err)
	}
	return e, nil
}

func (s *Store) ListWebhooks(ctx context.Context, owner string) ([]store.WebhookEndpoint, error) {
	out, err := queryAll(ctx, s.q, dbutil.ScanEndpoint, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE owner = $1 ORDER BY created_at, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

func (s *Store) UpdateWebhook(ctx context.Context, owner, id string, p store.WebhookPatch) (store.WebhookEndpoint, error) {
	var e store.WebhookEndpoint
	err := s.writeTx(ctx, func(q querier) error {
		var err error
		if e, err = getEndpoint(ctx, q, owner, id, "FOR UPDATE"); err != nil {
			return err
		}
		disabled := dbutil.ApplyWebhookPatch(&e, p, e.UpdatedAt)
		err = q.QueryRow(ctx, `UPDATE webhook_endpoints SET url = $1, events = $2, description = $3,
			disabled = $4, disabled_reason = $5, failure_streak = $6, updated_at = now() WHERE id = $7
			RETURNING updated_at`,
			e.URL, e.Events, e.Description, e.Disabled, e.DisabledReason, e.FailureStreak, id).Scan(&e.UpdatedAt)
		if err != nil {
			return err
		}
		e.UpdatedAt = e.UpdatedAt.UTC()
		if disabled {
			return failPending(ctx, q, id, e.DisabledReason)
		}
		return nil
	})
	if err != nil {
		return e, fmt.Errorf("update webhook %s: %w", id, err)
	}
	return e, nil
}

// failPending fails the pending deliveries of an endpoint just disabled.
func failPending(ctx context.Context, q querier, endpointID, reason string) error {
	_, err := q.Exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', last_error = $1,
		leased_by = '' WHERE endpoint_id = $2 AND status = 'pending'`,
		dbutil.EndpointDisabledError(reason), endpointID)
	return err
}

func (s *Store) DeleteWebhook(ctx context.Context, owner, id string) error {
	tag, err := s.q.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1 AND owner = $2`, id, owner)
	if err := oneRow(tag, err); err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	return nil
}

func (s *Store) RotateWebhookSecret(ctx context.Context, owner, id, secret string, overlap time.Duration) (store.WebhookEndpoint, error) {
	e, err := dbutil.ScanEndpoint(s.q.QueryRow(ctx, `UPDATE webhook_endpoints
		SET previous_secret = secret, previous_secret_until = now() + $1::bigint * interval '1 microsecond',
			secret = $2, updated_at = now()
		WHERE id = $3 AND owner = $4 RETURNING `+endpointColumns,
		overlap.Microseconds(), secret, id, owner))
	if err = notFound(err); err != nil {
		return e, fmt.Errorf("rotate secret of webhook %s: %w", id, err)
	}
	return e, nil
}

func (s *Store) ListDeliveries(ctx context.Context, owner, endpointID, cursor string, limit int) (store.DeliveryPage, error) {
	before, err := dbutil.DecodeDeliveryCursor(cursor)
	if err != nil {
		return store.DeliveryPage{}, err
	}
	if _, err := s.GetWebhook(ctx, owner, endpointID); err != nil {
		return store.DeliveryPage{}, err
	}
	limit = dbutil.PageLimit(limit)
	ds, err := queryAll(ctx, s.q, dbutil.ScanDelivery, `SELECT `+dbutil.DeliveryColumns+`
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
		WHERE d.endpoint_id = $1 AND d.id < $2 ORDER BY d.id DESC LIMIT $3`, endpointID, before, limit+1)
	if err != nil {
		return store.DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", endpointID, err)
	}
	return dbutil.DeliveryPage(ds, limit), nil
}

func (s *Store) Redeliver(ctx context.Context, owner, endpointID string, deliveryID int64) (store.WebhookDelivery, error) {
	d, err := dbutil.ScanDelivery(s.q.QueryRow(ctx, `WITH n AS (
			INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at, created_at)
			SELECT d.event_id, d.endpoint_id, now(), now() FROM webhook_deliveries d
			JOIN webhook_endpoints p ON p.id = d.endpoint_id
			WHERE d.id = $1 AND d.endpoint_id = $2 AND p.owner = $3
			RETURNING *)
		SELECT `+dbutil.DeliveryColumns+` FROM n AS d JOIN webhook_events e ON e.id = d.event_id`,
		deliveryID, endpointID, owner))
	if err = notFound(err); err != nil {
		return d, fmt.Errorf("redeliver %d: %w", deliveryID, err)
	}
	return d, nil
}

func (s *Store) RedeliverFailed(ctx context.Context, owner, endpointID string, since time.Time) (int, error) {
	var n int64
	err := s.writeTx(ctx, func(q querier) error {
		var one int
		err := q.QueryRow(ctx, `SELECT 1 FROM webhook_endpoints WHERE id = $1 AND owner = $2`, endpointID, owner).Scan(&one)
		if err != nil {
			return notFound(err)
		}
		tag, err := q.Exec(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at, created_at)
			SELECT d.event_id, d.endpoint_id, now(), now() FROM webhook_deliveries d
			WHERE d.endpoint_id = $1 AND d.status = 'failed' AND d.created_at >= $2
			  AND d.id = (SELECT max(l.id) FROM webhook_deliveries l WHERE l.endpoint_id = d.endpoint_id AND l.event_id = d.event_id)
			ORDER BY d.id`, endpointID, since)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("redeliver the failed deliveries of %s: %w", endpointID, err)
	}
	return int(n), nil
}

func (s *Store) WebhookEvents(ctx context.Context, owner string) ([]store.WebhookEvent, error) {
	out, err := queryAll(ctx, s.q, dbutil.ScanEvent, `SELECT `+dbutil.EventColumns+` FROM webhook_events e
		WHERE e.owner = $1 ORDER BY e.seq`, owner)
	if err != nil {
		return nil, fmt.Errorf("webhook events of %s: %w", owner, err)
	}
	return out, nil
}

func (s *Store) ClaimDeliveries(ctx context.Context, c store.Claim) ([]store.DeliveryBatch, error) {
	if err := dbutil.CheckClaim(c); err != nil {
		return nil, err
	}
	// The endpoints: enabled, not claimed (or their claim ran out), with a
	// due pending delivery; the one whose oldest is due the longest first.
	// Those another claim has locked are skipped; one whose row changed
	// since this statement's snapshot is re-checked on its new row, so two
	// claims never both hold it. Of each, the Batch oldest due deliveries:
	// their conditions are repeated in the UPDATE, which re-checks them on
	// rows a finish changed after the snapshot (a delivery just delivered
	// is not taken again). An endpoint is claimed only if some remain. b
	// is materialized: inlined, the planner may re-run it for every due
	// delivery of the UPDATE's scan.
	rows, err := s.q.Query(ctx, `WITH p AS (
			SELECT p.id FROM webhook_endpoints p
			CROSS JOIN LATERAL (SELECT min(d.next_attempt_at) AS due FROM webhook_deliveries d
				WHERE d.endpoint_id = p.id AND d.status = 'pending') o
			WHERE NOT p.disabled AND (p.claimed_until IS NULL OR p.claimed_until <= now()) AND o.due <= now()
			ORDER BY o.due, p.id LIMIT $3
			FOR UPDATE OF p SKIP LOCKED),
		b AS MATERIALIZED (
			SELECT d.id FROM p CROSS JOIN LATERAL (SELECT d.id FROM webhook_deliveries d
				WHERE d.endpoint_id = p.id AND d.status = 'pending' AND d.next_attempt_at <= now()
				ORDER BY d.id LIMIT $4) d),
		u AS (
			UPDATE webhook_deliveries d SET leased_by = $2 FROM b
			WHERE d.id = b.id AND d.status = 'pending' AND d.next_attempt_at <= now() RETURNING d.*),
		c AS (
			UPDATE webhook_endpoints p SET claimed_by = $2, claimed_until = now() + $1::bigint * interval '1 microsecond'
			WHERE p.id IN (SELECT endpoint_id FROM u) RETURNING p.id)
		SELECT `+dbutil.EventColumns+`, `+dbutil.DeliveryColumns+`, `+endpointColumnsP+`
		FROM u AS d JOIN webhook_events e ON e.id = d.event_id JOIN webhook_endpoints p ON p.id = d.endpoint_id
		WHERE d.endpoint_id IN (SELECT id FROM c)
		ORDER BY d.endpoint_id, d.id`,
		c.TTL.Microseconds(), c.ID, c.Max, c.Batch)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	defer rows.Close()
	var out []store.DeliveryBatch
	for rows.Next() {
		e, cd, err := dbutil.ScanClaimed(rows)
		if err != nil {
			return nil, fmt.Errorf("claim deliveries: %w", err)
		}
		out = dbutil.AddToBatch(out, e, cd)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// endpointColumnsP are endpointColumns of the endpoint p.
const endpointColumnsP = `p.id, p.owner, p.url, to_json(p.events), p.description, p.secret, p.previous_secret,
	p.previous_secret_until, p.disabled, p.disabled_reason, p.failure_streak, p.created_at, p.updated_at`

func (s *Store) SetEventBodies(ctx context.Context, bodies map[string][]byte) (map[string][]byte, error) {
	ids := make([]string, 0, len(bodies))
	values := make([][]byte, 0, len(bodies))
	for id, b := range bodies {
		ids, values = append(ids, id), append(values, b)
	}
	stored := make(map[string][]byte, len(bodies))
	err := s.writeTx(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `UPDATE webhook_events e SET body = coalesce(e.body, v.body)
			FROM unnest($1::text[], $2::bytea[]) AS v (id, body) WHERE e.id = v.id RETURNING e.id, e.body`, ids, values)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				id string
				b  []byte
			)
			if err := rows.Scan(&id, &b); err != nil {
				return err
			}
			stored[id] = b
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return dbutil.AllStored(bodies, stored) // else nothing is stored
	})
	if err != nil {
		return nil, fmt.Errorf("set event bodies: %w", err)
	}
	return stored, nil
}

func (s *Store) FinishDeliveries(ctx context.Context, o store.BatchOutcome) error {
	o, err := dbutil.CheckBatchOutcome(o)
	if err != nil {
		return err
	}
	ids, statuses := make([]int64, len(o.Outcomes)), make([]string, len(o.Outcomes))
	retries, codes, errs := make([]int64, len(o.Outcomes)), make([]int32, len(o.Outcomes)), make([]string, len(o.Outcomes))
	for i, d := range o.Outcomes {
		ids[i], statuses[i], retries[i], codes[i], errs[i] = d.ID, d.Status, d.RetryIn.Microseconds(), int32(d.StatusCode), d.Error
	}
	err = s.writeTx(ctx, func(q querier) error {
		e, err := dbutil.ScanEndpoint(q.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
			WHERE id = $1 AND claimed_by = $2 FOR UPDATE`, o.EndpointID, o.ClaimID))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		// The outcomes of the deliveries still pending under this claim
		// (one failed meanwhile with its disabled endpoint is left alone).
		rows, err := q.Query(ctx, `UPDATE webhook_deliveries d SET status = v.status, attempts = d.attempts + 1,
				next_attempt_at = CASE WHEN v.status = 'pending' THEN now() + v.retry * interval '1 microsecond'
					ELSE d.next_attempt_at END,
				leased_by = '', last_status_code = v.code, last_error = v.error,
				delivered_at = CASE WHEN v.status = 'delivered' THEN now() END
			FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::int[], $5::text[]) AS v (id, status, retry, code, error)
			WHERE d.id = v.id AND d.endpoint_id = $6 AND d.leased_by = $7 AND d.status = 'pending'
			RETURNING d.id`, ids, statuses, retries, codes, errs, o.EndpointID, o.ClaimID)
		if err != nil {
			return err
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		changed, disabled := dbutil.ApplyOutcomes(&e, dbutil.Recorded(o.Outcomes, applied), o.MaxFailures, time.Now())
		if _, err := q.Exec(ctx, `UPDATE webhook_endpoints SET claimed_by = '', claimed_until = NULL,
				failure_streak = $1, disabled = $2, disabled_reason = $3,
				updated_at = CASE WHEN $4 THEN now() ELSE updated_at END
			WHERE id = $5`, e.FailureStreak, e.Disabled, e.DisabledReason, changed, o.EndpointID); err != nil {
			return err
		}
		if disabled {
			return failPending(ctx, q, o.EndpointID, e.DisabledReason)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish deliveries to %s: %w", o.EndpointID, err)
	}
	return nil
}

func (s *Store) OldestDueDelivery(ctx context.Context) (time.Time, bool, error) {
	var due *time.Time
	err := s.q.QueryRow(ctx, `SELECT min(next_attempt_at) FROM webhook_deliveries
		WHERE status = 'pending' AND next_attempt_at <= now()`).Scan(&due)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest due delivery: %w", err)
	}
	if due == nil {
		return time.Time{}, false, nil
	}
	return due.UTC(), true, nil
}

func (s *Store) TurnThrough(ctx context.Context, chatID string, through int64) ([]chat.Message, error) {
	msgs, err := queryAll(ctx, s.q, dbutil.ScanMessage, `SELECT `+dbutil.MessageColumns+` FROM messages
		WHERE chat_id = $1 AND NOT superseded AND id <= $2 AND id >= coalesce((SELECT id FROM messages
			WHERE chat_id = $1 AND role = 'assistant' AND NOT superseded AND id <= $2 ORDER BY id DESC LIMIT 1), 0)
		ORDER BY id LIMIT $3`, chatID, through, store.MaxPageSize)
	if err != nil {
		return nil, fmt.Errorf("turn of chat %s through %d: %w", chatID, through, err)
	}
	return msgs, nil
}

func (s *Store) PruneWebhooks(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.writeTx(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `DELETE FROM webhook_deliveries WHERE id IN (
			SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND created_at < $1 ORDER BY id LIMIT $2)`,
			before, limit)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		tag, err = q.Exec(ctx, `DELETE FROM webhook_events WHERE seq IN (
			SELECT seq FROM webhook_events e WHERE e.created_at < $1
				AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
			ORDER BY seq LIMIT $2)`, before, limit)
		if err != nil {
			return err
		}
		n += tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune webhooks: %w", err)
	}
	return int(n), nil
}
