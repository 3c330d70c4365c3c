package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// withLedger wraps update, an UPDATE of one chat with RETURNING, so that
// the same statement adds the usage in the parameters in, out and cost to
// the chat's owner's row of the usage ledger for the database's current UTC
// day: a step's write costs no extra round trip. The statement returns the
// columns of ret from the update.
func withLedger(update, ret, in, out, cost string) string {
	return `WITH c AS (` + update + `),
	ledger AS (INSERT INTO owner_usage AS u (owner, day, input_tokens, output_tokens, cost_micros)
		SELECT owner, (now() AT TIME ZONE 'UTC')::date, ` + in + `, ` + out + `, ` + cost + ` FROM c
		ON CONFLICT (owner, day) DO UPDATE SET input_tokens = u.input_tokens + excluded.input_tokens,
			output_tokens = u.output_tokens + excluded.output_tokens,
			cost_micros = u.cost_micros + excluded.cost_micros)
	SELECT ` + ret + ` FROM c`
}

func (r reader) OwnerQuotas(ctx context.Context, owner string) (quota.Overrides, error) {
	var b []byte
	err := r.q.QueryRow(ctx, `SELECT q.overrides FROM owners o
		LEFT JOIN owner_quotas q ON q.owner = o.name WHERE o.name = $1`, owner).Scan(&b)
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
	err := r.q.QueryRow(ctx, `SELECT coalesce(sum(input_tokens), 0)::bigint, coalesce(sum(output_tokens), 0)::bigint,
		coalesce(sum(cost_micros), 0)::bigint FROM owner_usage WHERE owner = $1 AND day >= $2::date`,
		owner, dbutil.Day(since)).Scan(&u.InputTokens, &u.OutputTokens, &u.CostMicros)
	if err != nil {
		return chat.Usage{}, fmt.Errorf("usage of owner %s: %w", owner, err)
	}
	return u, nil
}

func (r reader) CountChats(ctx context.Context, owner string) (int, error) {
	var n int
	if err := r.q.QueryRow(ctx, `SELECT count(*) FROM chats WHERE owner = $1`, owner).Scan(&n); err != nil {
		return 0, fmt.Errorf("count chats of owner %s: %w", owner, err)
	}
	return n, nil
}

// OwnerStats reads the queues from the partial indexes of pending and
// running chats and the usage from the ledger's days.
func (r reader) OwnerStats(ctx context.Context, since time.Time) ([]store.OwnerStat, error) {
	stats, err := queryAll(ctx, r.q, dbutil.ScanOwnerStat, `SELECT owner, sum(pending)::bigint, sum(running)::bigint,
		sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cost_micros)::bigint
		FROM (
			SELECT owner, 1 AS pending, 0 AS running, 0 AS input_tokens, 0 AS output_tokens, 0 AS cost_micros
				FROM chats WHERE status = 'pending'
			UNION ALL
			SELECT owner, 0, 1, 0, 0, 0 FROM chats WHERE status = 'running'
			UNION ALL
			SELECT owner, 0, 0, input_tokens, output_tokens, cost_micros FROM owner_usage WHERE day >= $1::date
		) s GROUP BY owner ORDER BY owner`, dbutil.Day(since))
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
	tag, err := t.q.Exec(ctx, `INSERT INTO owner_quotas (owner, overrides, updated_at)
		SELECT name, $2::jsonb, $3 FROM owners WHERE name = $1
		ON CONFLICT (owner) DO UPDATE SET overrides = excluded.overrides, updated_at = excluded.updated_at`,
		owner, string(b), dbutil.Now())
	if err := oneRow(tag, err); err != nil {
		return fmt.Errorf("set quotas of owner %s: %w", owner, err)
	}
	return nil
}
