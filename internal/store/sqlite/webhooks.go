package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// endpointColumns are the columns dbutil.ScanEndpoint reads, in its order.
const endpointColumns = `id, owner, url, events, description, secret, previous_secret,
	previous_secret_until, disabled, disabled_reason, failure_streak, created_at, updated_at`

func (s *Store) CreateWebhook(ctx context.Context, e *store.WebhookEndpoint, max int) error {
	events, err := json.Marshal(e.Events)
	if err != nil {
		return fmt.Errorf("create webhook: %w", err)
	}
	now := dbutil.Now()
	err = s.writeOne(ctx, func(q querier) error {
		if max > 0 {
			var n int
			if err := q.QueryRowContext(ctx, `SELECT count(*) FROM webhook_endpoints WHERE owner = ?`, e.Owner).Scan(&n); err != nil {
				return err
			}
			if n >= max {
				return store.ErrCapReached
			}
		}
		_, err := q.ExecContext(ctx, `INSERT INTO webhook_endpoints (`+endpointColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, '', NULL, ?, ?, 0, ?, ?)`,
			e.ID, e.Owner, e.URL, string(events), e.Description, e.Secret, e.Disabled, e.DisabledReason,
			dbutil.Micros(now), dbutil.Micros(now))
		return classify(err)
	})
	if err != nil {
		return fmt.Errorf("create webhook %s: %w", e.ID, err)
	}
	e.CreatedAt, e.UpdatedAt, e.FailureStreak = now, now, 0
	return nil
}

func (s *Store) GetWebhook(ctx context.Context, owner, id string) (store.WebhookEndpoint, error) {
	return getEndpoint(ctx, s.reader.q, owner, id)
}

func getEndpoint(ctx context.Context, q querier, owner, id string) (store.WebhookEndpoint, error) {
	e, err := dbutil.ScanEndpoint(q.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE id = ? AND owner = ?`, id, owner))
	if err = notFound(err); err != nil {
		return e, fmt.Errorf("webhook %s: %w", id, err)
	}
	return e, nil
}

func (s *Store) ListWebhooks(ctx context.Context, owner string) ([]store.WebhookEndpoint, error) {
	out, err := queryAll(ctx, s.reader.q, dbutil.ScanEndpoint, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE owner = ? ORDER BY created_at, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return out, nil
}

func (s *Store) UpdateWebhook(ctx context.Context, owner, id string, p store.WebhookPatch) (store.WebhookEndpoint, error) {
	var e store.WebhookEndpoint
	err := s.writeOne(ctx, func(q querier) error {
		var err error
		if e, err = getEndpoint(ctx, q, owner, id); err != nil {
			return err
		}
		disabled := dbutil.ApplyWebhookPatch(&e, p, dbutil.Now())
		events, err := json.Marshal(e.Events)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `UPDATE webhook_endpoints SET url = ?, events = ?, description = ?,
			disabled = ?, disabled_reason = ?, failure_streak = ?, updated_at = ? WHERE id = ?`,
			e.URL, string(events), e.Description, e.Disabled, e.DisabledReason, e.FailureStreak,
			dbutil.Micros(e.UpdatedAt), id); err != nil {
			return err
		}
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
	_, err := q.ExecContext(ctx, `UPDATE webhook_deliveries SET status = 'failed', last_error = ?,
		leased_by = '' WHERE endpoint_id = ? AND status = 'pending'`,
		dbutil.EndpointDisabledError(reason), endpointID)
	return err
}

func (s *Store) DeleteWebhook(ctx context.Context, owner, id string) error {
	err := s.writeOne(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE id = ? AND owner = ?`, id, owner)
		return oneRow(res, err)
	})
	if err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	return nil
}

func (s *Store) RotateWebhookSecret(ctx context.Context, owner, id, secret string, overlap time.Duration) (store.WebhookEndpoint, error) {
	var e store.WebhookEndpoint
	now := dbutil.Now()
	err := s.writeOne(ctx, func(q querier) error {
		var err error
		e, err = dbutil.ScanEndpoint(q.QueryRowContext(ctx, `UPDATE webhook_endpoints
			SET previous_secret = secret, previous_secret_until = ?, secret = ?, updated_at = ?
			WHERE id = ? AND owner = ? RETURNING `+endpointColumns,
			dbutil.Micros(now.Add(overlap)), secret, dbutil.Micros(now), id, owner))
		return notFound(err)
	})
	if err != nil {
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
	ds, err := queryAll(ctx, s.reader.q, dbutil.ScanDelivery, `SELECT `+dbutil.DeliveryColumns+`
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
		WHERE d.endpoint_id = ? AND d.id < ? ORDER BY d.id DESC LIMIT ?`, endpointID, before, limit+1)
	if err != nil {
		return store.DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", endpointID, err)
	}
	return dbutil.DeliveryPage(ds, limit), nil
}

func (s *Store) Redeliver(ctx context.Context, owner, endpointID string, deliveryID int64) (store.WebhookDelivery, error) {
	var d store.WebhookDelivery
	now := dbutil.Micros(dbutil.Now())
	err := s.writeOne(ctx, func(q querier) error {
		var id int64
		err := q.QueryRowContext(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at, created_at)
			SELECT d.event_id, d.endpoint_id, ?, ? FROM webhook_deliveries d
			JOIN webhook_endpoints p ON p.id = d.endpoint_id
			WHERE d.id = ? AND d.endpoint_id = ? AND p.owner = ? RETURNING id`,
			now, now, deliveryID, endpointID, owner).Scan(&id)
		if err != nil {
			return notFound(err)
		}
		d, err = dbutil.ScanDelivery(q.QueryRowContext(ctx, `SELECT `+dbutil.DeliveryColumns+`
			FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.id = ?`, id))
		return err
	})
	if err != nil {
		return d, fmt.Errorf("redeliver %d: %w", deliveryID, err)
	}
	return d, nil
}

func (s *Store) RedeliverFailed(ctx context.Context, owner, endpointID string, since time.Time) (int, error) {
	var n int64
	now := dbutil.Micros(dbutil.Now())
	err := s.writeOne(ctx, func(q querier) error {
		var one int
		err := q.QueryRowContext(ctx, `SELECT 1 FROM webhook_endpoints WHERE id = ? AND owner = ?`, endpointID, owner).Scan(&one)
		if err != nil {
			return notFound(err)
		}
		res, err := q.ExecContext(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at, created_at)
			SELECT d.event_id, d.endpoint_id, ?, ? FROM webhook_deliveries d
			WHERE d.endpoint_id = ? AND d.status = 'failed' AND d.created_at >= ?
			  AND d.id = (SELECT max(l.id) FROM webhook_deliveries l WHERE l.endpoint_id = d.endpoint_id AND l.event_id = d.event_id)
			ORDER BY d.id`, now, now, endpointID, dbutil.Micros(since))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("redeliver the failed deliveries of %s: %w", endpointID, err)
	}
	return int(n), nil
}

func (s *Store) WebhookEvents(ctx context.Context, owner string) ([]store.WebhookEvent, error) {
	out, err := queryAll(ctx, s.reader.q, dbutil.ScanEvent, `SELECT `+dbutil.EventColumns+` FROM webhook_events e
		WHERE e.owner = ? ORDER BY e.seq`, owner)
	if err != nil {
		return nil, fmt.Errorf("webhook events of %s: %w", owner, err)
	}
	return out, nil
}

func (s *Store) ClaimDeliveries(ctx context.Context, c store.Claim) ([]store.DeliveryBatch, error) {
	if err := dbutil.CheckClaim(c); err != nil {
		return nil, err
	}
	now := dbutil.Micros(dbutil.Now())
	// Most wake-ups find nothing due: they are answered by a reader and
	// never take the writer.
	var one int
	err := s.reader.q.QueryRowContext(ctx, `SELECT 1 FROM webhook_deliveries
		WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 1`, now).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	var out []store.DeliveryBatch
	err = s.writeOne(ctx, func(q querier) error {
		out = nil
		// The endpoints: enabled, not claimed (or their claim ran out),
		// with a due pending delivery; the one whose oldest is due the
		// longest first. The writer is this process's alone, so no other
		// claim runs meanwhile.
		rows, err := q.QueryContext(ctx, `UPDATE webhook_endpoints SET claimed_by = ?3, claimed_until = ?1 + ?2
			WHERE id IN (SELECT p.id FROM webhook_endpoints p
				JOIN (SELECT endpoint_id, min(next_attempt_at) AS due FROM webhook_deliveries
					WHERE status = 'pending' GROUP BY endpoint_id) o ON o.endpoint_id = p.id
				WHERE p.disabled = 0 AND (p.claimed_until IS NULL OR p.claimed_until <= ?1) AND o.due <= ?1
				ORDER BY o.due, p.id LIMIT ?4)
			RETURNING `+endpointColumns, now, c.TTL.Microseconds(), c.ID, c.Max)
		if err != nil {
			return err
		}
		endpoints, err := dbutil.Collect(rows, dbutil.ScanEndpoint)
		rows.Close()
		if err != nil {
			return err
		}
		for _, e := range endpoints {
			batch, err := claimBatch(ctx, q, e, c, now)
			if err != nil {
				return err
			}
			out = append(out, batch)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// claimBatch marks the c.Batch oldest due deliveries of the endpoint e as
// c's, and reads them with their events.
func claimBatch(ctx context.Context, q querier, e store.WebhookEndpoint, c store.Claim, now int64) (store.DeliveryBatch, error) {
	batch := store.DeliveryBatch{Endpoint: e}
	rows, err := q.QueryContext(ctx, `UPDATE webhook_deliveries SET leased_by = ?1
		WHERE id IN (SELECT id FROM webhook_deliveries
			WHERE endpoint_id = ?2 AND status = 'pending' AND next_attempt_at <= ?3 ORDER BY id LIMIT ?4)
		RETURNING id`, c.ID, e.ID, now, c.Batch)
	if err != nil {
		return batch, err
	}
	ids, err := dbutil.Collect(rows, dbutil.ScanInt64)
	rows.Close()
	if err != nil {
		return batch, err
	}
	slices.Sort(ids)
	for _, id := range ids {
		var cd store.ClaimedDelivery
		if cd.Delivery, err = dbutil.ScanDelivery(q.QueryRowContext(ctx, `SELECT `+dbutil.DeliveryColumns+`
			FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.id = ?`, id)); err != nil {
			return batch, fmt.Errorf("read delivery %d: %w", id, err)
		}
		if cd.Event, err = dbutil.ScanEvent(q.QueryRowContext(ctx, `SELECT `+dbutil.EventColumns+`
			FROM webhook_events e WHERE e.id = ?`, cd.Delivery.EventID)); err != nil {
			return batch, fmt.Errorf("read event of delivery %d: %w", id, err)
		}
		batch.Deliveries = append(batch.Deliveries, cd)
	}
	return batch, nil
}

func (s *Store) SetEventBodies(ctx context.Context, bodies map[string][]byte) (map[string][]byte, error) {
	stored := make(map[string][]byte, len(bodies))
	err := s.writeOne(ctx, func(q querier) error {
		for id, body := range bodies {
			var b []byte
			err := q.QueryRowContext(ctx, `UPDATE webhook_events SET body = coalesce(body, ?) WHERE id = ? RETURNING body`,
				body, id).Scan(&b)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("event %s: %w", id, store.ErrNotFound)
			}
			if err != nil {
				return err
			}
			stored[id] = b
		}
		return nil
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
	now := dbutil.Now()
	err = s.writeOne(ctx, func(q querier) error {
		e, err := dbutil.ScanEndpoint(q.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
			WHERE id = ? AND claimed_by = ?`, o.EndpointID, o.ClaimID))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		// The outcomes of the deliveries still pending under this claim
		// (one failed meanwhile with its disabled endpoint is left alone).
		var applied []int64
		for _, d := range o.Outcomes {
			res, err := q.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?1, attempts = attempts + 1,
					next_attempt_at = CASE WHEN ?1 = 'pending' THEN ?2 + ?3 ELSE next_attempt_at END,
					leased_by = '', last_status_code = ?4, last_error = ?5,
					delivered_at = CASE WHEN ?1 = 'delivered' THEN ?2 END
				WHERE id = ?6 AND endpoint_id = ?7 AND leased_by = ?8 AND status = 'pending'`,
				d.Status, dbutil.Micros(now), d.RetryIn.Microseconds(), d.StatusCode, d.Error, d.ID, o.EndpointID, o.ClaimID)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n == 1 {
				applied = append(applied, d.ID)
			}
		}
		_, disabled := dbutil.ApplyOutcomes(&e, dbutil.Recorded(o.Outcomes, applied), o.MaxFailures, now)
		if _, err := q.ExecContext(ctx, `UPDATE webhook_endpoints SET claimed_by = '', claimed_until = NULL,
				failure_streak = ?, disabled = ?, disabled_reason = ?, updated_at = ? WHERE id = ?`,
			e.FailureStreak, e.Disabled, e.DisabledReason, dbutil.Micros(e.UpdatedAt), o.EndpointID); err != nil {
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
	var due sql.NullInt64
	err := s.reader.q.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM webhook_deliveries
		WHERE status = 'pending' AND next_attempt_at <= ?`, dbutil.Micros(dbutil.Now())).Scan(&due)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest due delivery: %w", err)
	}
	if !due.Valid {
		return time.Time{}, false, nil
	}
	return dbutil.FromMicros(due.Int64), true, nil
}

func (s *Store) TurnThrough(ctx context.Context, chatID string, through int64) ([]chat.Message, error) {
	msgs, err := queryAll(ctx, s.reader.q, dbutil.ScanMessage, `SELECT `+dbutil.MessageColumns+` FROM messages
		WHERE chat_id = ?1 AND superseded = 0 AND id <= ?2 AND id >= coalesce((SELECT id FROM messages
			WHERE chat_id = ?1 AND role = 'assistant' AND superseded = 0 AND id <= ?2 ORDER BY id DESC LIMIT 1), 0)
		ORDER BY id LIMIT ?3`, chatID, through, store.MaxPageSize)
	if err != nil {
		return nil, fmt.Errorf("turn of chat %s through %d: %w", chatID, through, err)
	}
	return msgs, nil
}

func (s *Store) PruneWebhooks(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.writeOne(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE id IN (
			SELECT id FROM webhook_deliveries WHERE status <> 'pending' AND created_at < ?1 ORDER BY id LIMIT ?2)`,
			dbutil.Micros(before), limit)
		if err != nil {
			return err
		}
		d, _ := res.RowsAffected()
		res, err = q.ExecContext(ctx, `DELETE FROM webhook_events WHERE seq IN (
			SELECT seq FROM webhook_events e WHERE e.created_at < ?1
				AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
			ORDER BY seq LIMIT ?2)`, dbutil.Micros(before), limit)
		if err != nil {
			return err
		}
		e, _ := res.RowsAffected()
		n = d + e
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune webhooks: %w", err)
	}
	return int(n), nil
}
