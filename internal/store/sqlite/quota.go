package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// addToLedger adds u to the owner's row of the usage ledger for the UTC day
// of now, in the caller's transaction; a zero u writes nothing.
func addToLedger(ctx context.Context, q querier, owner string, now time.Time, u chat.Usage) error {
	if u == (chat.Usage{}) {
		return nil
	}
	_, err := q.ExecContext(ctx, `INSERT INTO owner_usage (owner, day, input_tokens, output_tokens, cost_micros)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (owner, day) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
			output_tokens = output_tokens + excluded.output_tokens, cost_micros = cost_micros + excluded.cost_micros`,
		owner, dbutil.Day(now), u.InputTokens, u.OutputTokens, u.CostMicros)
	if err != nil {
		return fmt.Errorf("record usage of owner %s: %w", owner, classify(err))
	}
	return nil
}

func (r reader) OwnerQuotas(ctx context.Context, owner string) (quota.Overrides, error) {
	var b []byte
	err := r.q.QueryRowContext(ctx, `SELECT q.overrides FROM owners o
		LEFT JOIN owner_quotas q ON q.owner = o.name WHERE o.name = ?`, owner).Scan(&b)
	if err = notFound(err); err != nil {
		return quota.Overrides{}, fmt.Errorf("quotas of owner %s: %w", owner, err)
	}
	o, err := dbutil.DecodeOverrides(b)
	if err != nil {
		return quota.Overrides{}, fmt.Errorf("quotas of owner %s: %w", owner, err)
	}
	return o, nil
}

func (r reader) OwnerUsage(ctx context.Context, owner string, since time.Time) (chat.Usage, error) {
	var u chat.Usage
	err := r.q.QueryRowContext(ctx, `SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
		coalesce(sum(cost_micros), 0) FROM owner_usage WHERE owner = ? AND day >= ?`,
		owner, dbutil.Day(since)).Scan(&u.InputTokens, &u.OutputTokens, &u.CostMicros)
	if err != nil {
		return chat.Usage{}, fmt.Errorf("usage of owner %s: %w", owner, err)
	}
	return u, nil
}

func (r reader) CountChats(ctx context.Context, owner string) (int, error) {
	var n int
	if err := r.q.QueryRowContext(ctx, `SELECT count(*) FROM chats WHERE owner = ?`, owner).Scan(&n); err != nil {
		return 0, fmt.Errorf("count chats of owner %s: %w", owner, err)
	}
	return n, nil
}

// OwnerStats reads the queues from the partial indexes of pending and
// running chats and the usage from the ledger's days.
func (r reader) OwnerStats(ctx context.Context, since time.Time) ([]store.OwnerStat, error) {
	stats, err := queryAll(ctx, r.q, dbutil.ScanOwnerStat, `SELECT owner, sum(pending), sum(running),
		sum(input_tokens), sum(output_tokens), sum(cost_micros)
		FROM (
			SELECT owner, 1 AS pending, 0 AS running, 0 AS input_tokens, 0 AS output_tokens, 0 AS cost_micros
				FROM chats WHERE status = 'pending'
			UNION ALL
			SELECT owner, 0, 1, 0, 0, 0 FROM chats WHERE status = 'running'
			UNION ALL
			SELECT owner, 0, 0, input_tokens, output_tokens, cost_micros FROM owner_usage WHERE day >= ?
		) GROUP BY owner ORDER BY owner`, dbutil.Day(since))
	if err != nil {
		return nil, fmt.Errorf("owner stats: %w", err)
	}
	return stats, nil
}

func (t *tx) SetOwnerQuotas(ctx context.Context, owner string, o quota.Overrides) error {
	b, err := dbutil.EncodeOverrides(o)
	if err != nil {
		return fmt.Errorf("set quotas of owner %s: %w", owner, err)
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO owner_quotas (owner, overrides, updated_at)
		SELECT name, ?, ? FROM owners WHERE name = ?
		ON CONFLICT (owner) DO UPDATE SET overrides = excluded.overrides, updated_at = excluded.updated_at`,
		string(b), dbutil.Micros(dbutil.Now()), owner)
	if err := oneRow(res, err); err != nil {
		return fmt.Errorf("set quotas of owner %s: %w", owner, err)
	}
	return nil
}
