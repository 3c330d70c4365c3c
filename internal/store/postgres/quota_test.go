package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestOwnerUsageSinceDay: OwnerUsage and OwnerStats count the ledger's days
// from since's UTC day on, and no earlier day.
func TestOwnerUsageSinceDay(t *testing.T) {
	pgtest.Require(t)
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	db, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { db.Close(t.Context()) })
	c := chat.Chat{ID: "c", Owner: "alice", Model: "m", Status: chat.Waiting}
	today := chat.Usage{InputTokens: 1, OutputTokens: 2, CostMicros: 3}
	inTx(t, s, func(tx store.Tx) error {
		if _, err := tx.CreateOwner(t.Context(), "alice"); err != nil {
			return err
		}
		if err := tx.InsertChat(t.Context(), &c); err != nil {
			return err
		}
		return tx.AddUsage(t.Context(), c.ID, today)
	})
	// Earlier days, written as the ledger would have been then.
	_, err = db.Exec(t.Context(), `INSERT INTO owner_usage (owner, day, input_tokens, output_tokens, cost_micros) VALUES
		('alice', (now() AT TIME ZONE 'UTC')::date - 1, 10, 20, 30),
		('alice', (now() AT TIME ZONE 'UTC')::date - 40, 100, 200, 300)`)
	if err != nil {
		t.Fatalf("insert past days: %v", err)
	}
	now := time.Now()
	yesterday := chat.Usage{InputTokens: 10, OutputTokens: 20, CostMicros: 30}
	longAgo := chat.Usage{InputTokens: 100, OutputTokens: 200, CostMicros: 300}
	for _, tc := range []struct {
		name  string
		since time.Time
		want  chat.Usage
	}{
		{"today's start", quota.Day.Start(now), today},
		{"yesterday's last microsecond", quota.Day.Start(now).Add(-time.Microsecond), today.Add(yesterday)},
		{"this time yesterday", now.AddDate(0, 0, -1), today.Add(yesterday)},
		{"41 days ago", now.AddDate(0, 0, -41), today.Add(yesterday).Add(longAgo)},
	} {
		got, err := s.OwnerUsage(t.Context(), "alice", tc.since)
		if err != nil {
			t.Fatalf("OwnerUsage: %v", err)
		}
		if got != tc.want {
			t.Errorf("usage since %s: got %+v, want %+v", tc.name, got, tc.want)
		}
		stats, err := s.OwnerStats(t.Context(), tc.since)
		if err != nil {
			t.Fatalf("OwnerStats: %v", err)
		}
		if len(stats) != 1 || stats[0] != (store.OwnerStat{Owner: "alice", Usage: tc.want}) {
			t.Errorf("stats since %s: got %+v, want alice's usage %+v", tc.name, stats, tc.want)
		}
	}
}
