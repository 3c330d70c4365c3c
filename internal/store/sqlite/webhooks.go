package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// endpointColumns are the columns scanEndpoint reads, in its order.
const endpointColumns = `id, owner, url, events, description, secret, previous_secret,
	previous_secret_until, disabled, disabled_reason, failure_streak, created_at, updated_at`

func scanEndpoint(row interface{ Scan(...any) error }) (store.WebhookEndpoint, error) {
	var (
		e                store.WebhookEndpoint
		events           []byte
		until            sql.NullInt64
		created, updated int64
	)
	err := row.Scan(&e.ID, &e.Owner, &e.URL, &events, &e.Description, &e.Secret, &e.PreviousSecret,
		&until, &e.Disabled, &e.DisabledReason, &e.FailureStreak, &created, &updated)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(events, &e.Events); err != nil {
		return e, fmt.Errorf("decode events of endpoint %s: %w", e.ID, err)
	}
	e.PreviousSecretUntil = nullTime(until)
	e.CreatedAt, e.UpdatedAt = dbutil.FromMicros(created), dbutil.FromMicros(updated)
	return e, nil
}

// deliveryColumns are the columns scanDelivery reads (d: the delivery, e:
// its event).
const deliveryColumns = `d.id, d.event_id, d.endpoint_id, e.type, e.chat_id, d.status, d.attempts,
	d.next_attempt_at, d.last_status_code, d.last_error, d.created_at, d.delivered_at`

func scanDelivery(row interface{ Scan(...any) error }, more ...any) (store.WebhookDelivery, error) {
	var (
		d         store.WebhookDelivery
		next      int64
		created   int64
		delivered sql.NullInt64
	)
	dest := append([]any{&d.ID, &d.EventID, &d.EndpointID, &d.EventType, &d.ChatID, &d.Status, &d.Attempts,
		&next, &d.LastStatusCode, &d.LastError, &created, &delivered}, more...)
	if err := row.Scan(dest...); err != nil {
		return d, err
	}
	if d.Status == store.DeliveryPending {
		t := dbutil.FromMicros(next)
		d.NextAttemptAt = &t
	}
	d.CreatedAt, d.DeliveredAt = dbutil.FromMicros(created), nullTime(delivered)
	return d, nil
}

func (s *Store) CreateWebhook(ctx context.Context, e *store.WebhookEndpoint) error {
	events, err := json.Marshal(e.Events)
	if err != nil {
		return fmt.Errorf("create webhook: %w", err)
	}
	now := dbutil.Now()
	err = s.writeOne(ctx, func(q querier) error {
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
	e, err := scanEndpoint(q.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE id = ? AND owner = ?`, id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return e, fmt.Errorf("webhook %s: %w", id, err)
	}
	return e, nil
}

func (s *Store) ListWebhooks(ctx context.Context, owner string) ([]store.WebhookEndpoint, error) {
	rows, err := s.reader.q.QueryContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE owner = ? ORDER BY created_at, id`, owner)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	defer rows.Close()
	out := []store.WebhookEndpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhooks: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
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
		lease_until = NULL, leased_by = '' WHERE endpoint_id = ? AND status = 'pending'`,
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
		e, err = scanEndpoint(q.QueryRowContext(ctx, `UPDATE webhook_endpoints
			SET previous_secret = secret, previous_secret_until = ?, secret = ?, updated_at = ?
			WHERE id = ? AND owner = ? RETURNING `+endpointColumns,
			dbutil.Micros(now.Add(overlap)), secret, dbutil.Micros(now), id, owner))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
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
	rows, err := s.reader.q.QueryContext(ctx, `SELECT `+deliveryColumns+`
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
		WHERE d.endpoint_id = ? AND d.id < ? ORDER BY d.id DESC LIMIT ?`, endpointID, before, limit+1)
	if err != nil {
		return store.DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", endpointID, err)
	}
	defer rows.Close()
	page := store.DeliveryPage{Deliveries: []store.WebhookDelivery{}}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return store.DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", endpointID, err)
		}
		page.Deliveries = append(page.Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return store.DeliveryPage{}, fmt.Errorf("list deliveries of %s: %w", endpointID, err)
	}
	if len(page.Deliveries) > limit {
		page.Deliveries = page.Deliveries[:limit]
		page.NextCursor = dbutil.DeliveryCursor(page.Deliveries[limit-1].ID)
	}
	return page, nil
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
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		d, err = scanDelivery(q.QueryRowContext(ctx, `SELECT `+deliveryColumns+`
			FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.id = ?`, id))
		return err
	})
	if err != nil {
		return d, fmt.Errorf("redeliver %d: %w", deliveryID, err)
	}
	return d, nil
}

// eventColumns are the columns scanEvent reads (e: the event).
const eventColumns = `e.id, e.owner, e.chat_id, e.type, e.title, e.status, e.labels, e.last_error,
	e.usage_input_tokens, e.usage_output_tokens, e.usage_cost_micros, e.action_deadline,
	e.through_message_id, e.body, e.created_at`

func scanEvent(row interface{ Scan(...any) error }, more ...any) (store.WebhookEvent, error) {
	var (
		ev              store.WebhookEvent
		labels, lastErr []byte
		deadline        sql.NullInt64
		created         int64
	)
	c := &ev.Chat
	dest := append([]any{&ev.ID, &ev.Owner, &ev.ChatID, &ev.Type, &c.Title, &c.Status, &labels, &lastErr,
		&c.Usage.InputTokens, &c.Usage.OutputTokens, &c.Usage.CostMicros, &deadline,
		&ev.ThroughMessageID, &ev.Body, &created}, more...)
	if err := row.Scan(dest...); err != nil {
		return ev, err
	}
	if err := dbutil.DecodeChat(c, []byte("[]"), labels, lastErr); err != nil {
		return ev, fmt.Errorf("decode event %s: %w", ev.ID, err)
	}
	c.ID, c.Owner = ev.ChatID, ev.Owner
	c.ActionDeadline = nullTime(deadline)
	ev.CreatedAt = dbutil.FromMicros(created)
	return ev, nil
}

func (s *Store) WebhookEvents(ctx context.Context, owner string) ([]store.WebhookEvent, error) {
	rows, err := s.reader.q.QueryContext(ctx, `SELECT `+eventColumns+` FROM webhook_events e
		WHERE e.owner = ? ORDER BY e.seq`, owner)
	if err != nil {
		return nil, fmt.Errorf("webhook events of %s: %w", owner, err)
	}
	defer rows.Close()
	out := []store.WebhookEvent{}
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("webhook events of %s: %w", owner, err)
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

func (s *Store) ClaimDeliveries(ctx context.Context, c store.Claim) ([]store.ClaimedDelivery, error) {
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
	var out []store.ClaimedDelivery
	err = s.writeOne(ctx, func(q querier) error {
		out = nil
		// A delivery is claimable when it is due, its endpoint is enabled,
		// and no other pending delivery of its endpoint is leased or due
		// before it.
		rows, err := q.QueryContext(ctx, `UPDATE webhook_deliveries SET lease_until = ?1 + ?2, leased_by = ?3
			WHERE id IN (SELECT d.id FROM webhook_deliveries d
				JOIN webhook_endpoints p ON p.id = d.endpoint_id
				WHERE d.status = 'pending' AND d.next_attempt_at <= ?1 AND p.disabled = 0
					AND NOT EXISTS (SELECT 1 FROM webhook_deliveries o
						WHERE o.endpoint_id = d.endpoint_id AND o.status = 'pending'
							AND (o.lease_until > ?1 OR (o.next_attempt_at <= ?1 AND o.id < d.id)))
				ORDER BY d.next_attempt_at, d.id LIMIT ?4)
			RETURNING id`, now, c.TTL.Microseconds(), c.WorkerID, c.Max)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			cd, err := readClaimed(ctx, q, id)
			if err != nil {
				return err
			}
			out = append(out, cd)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// readClaimed reads a claimed delivery with its event and endpoint.
func readClaimed(ctx context.Context, q querier, id int64) (store.ClaimedDelivery, error) {
	var (
		cd         store.ClaimedDelivery
		endpointID string
		owner      string
	)
	ev, err := scanEvent(q.QueryRowContext(ctx, `SELECT `+eventColumns+`, d.endpoint_id, p.owner
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
		JOIN webhook_endpoints p ON p.id = d.endpoint_id WHERE d.id = ?`, id), &endpointID, &owner)
	if err != nil {
		return cd, fmt.Errorf("read delivery %d: %w", id, err)
	}
	d, err := scanDelivery(q.QueryRowContext(ctx, `SELECT `+deliveryColumns+`
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.id = ?`, id))
	if err != nil {
		return cd, fmt.Errorf("read delivery %d: %w", id, err)
	}
	e, err := getEndpoint(ctx, q, owner, endpointID)
	if err != nil {
		return cd, err
	}
	return store.ClaimedDelivery{Delivery: d, Endpoint: e, Event: ev}, nil
}

func (s *Store) SetEventBody(ctx context.Context, eventID string, body []byte) ([]byte, error) {
	var stored []byte
	err := s.writeOne(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, `UPDATE webhook_events SET body = coalesce(body, ?) WHERE id = ? RETURNING body`,
			body, eventID).Scan(&stored)
	})
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("set body of event %s: %w", eventID, err)
	}
	return stored, nil
}

func (s *Store) FinishDelivery(ctx context.Context, o store.DeliveryOutcome) error {
	if err := dbutil.CheckDeliveryOutcome(o); err != nil {
		return err
	}
	now := dbutil.Micros(dbutil.Now())
	err := s.writeOne(ctx, func(q querier) error {
		var endpointID string
		err := q.QueryRowContext(ctx, `UPDATE webhook_deliveries SET status = ?1, attempts = attempts + 1,
				next_attempt_at = CASE WHEN ?1 = 'pending' THEN ?2 + ?3 ELSE next_attempt_at END,
				lease_until = NULL, leased_by = '', last_status_code = ?4, last_error = ?5,
				delivered_at = CASE WHEN ?1 = 'delivered' THEN ?2 END
			WHERE id = ?6 AND leased_by = ?7 AND status = 'pending' RETURNING endpoint_id`,
			o.Status, now, o.RetryIn.Microseconds(), o.StatusCode, o.Error, o.ID, o.WorkerID).Scan(&endpointID)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if o.Status == store.DeliveryPending && o.Disable == "" {
			return nil
		}
		// The endpoint's streak: reset by a delivery, grown by a failure;
		// at MaxFailures, or on Disable, the endpoint is disabled.
		var (
			disabled bool
			reason   string
		)
		err = q.QueryRowContext(ctx, `UPDATE webhook_endpoints SET
				failure_streak = CASE ?1 WHEN 'delivered' THEN 0 WHEN 'failed' THEN failure_streak + 1 ELSE failure_streak END,
				disabled_reason = CASE WHEN disabled THEN disabled_reason
					WHEN ?2 <> '' THEN ?2
					WHEN ?1 = 'failed' AND ?3 > 0 AND failure_streak + 1 >= ?3
						THEN 'disabled after ' || (failure_streak + 1) || ' failed deliveries in a row'
					ELSE disabled_reason END,
				disabled = CASE WHEN ?2 <> '' OR (?1 = 'failed' AND ?3 > 0 AND failure_streak + 1 >= ?3)
					THEN 1 ELSE disabled END,
				updated_at = ?4
			WHERE id = ?5 RETURNING disabled, disabled_reason`,
			o.Status, o.Disable, o.MaxFailures, now, endpointID).Scan(&disabled, &reason)
		if err != nil {
			return err
		}
		if disabled {
			return failPending(ctx, q, endpointID, reason)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("finish delivery %d: %w", o.ID, err)
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
	rows, err := s.reader.q.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE chat_id = ?1 AND superseded = 0 AND id <= ?2 AND id >= coalesce((SELECT id FROM messages
			WHERE chat_id = ?1 AND role = 'assistant' AND superseded = 0 AND id <= ?2 ORDER BY id DESC LIMIT 1), 0)
		ORDER BY id LIMIT ?3`, chatID, through, store.MaxPageSize)
	if err != nil {
		return nil, fmt.Errorf("turn of chat %s through %d: %w", chatID, through, err)
	}
	msgs := []chat.Message{}
	if err := scanMessages(rows, func(m chat.Message) { msgs = append(msgs, m) }); err != nil {
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
