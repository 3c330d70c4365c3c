package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/sqlite"
)

// TestOwnerUsageSinceDay: OwnerUsage and OwnerStats count the ledger's days
// from since's UTC day on, and no earlier day.
func TestOwnerUsageSinceDay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	c := chat.Chat{ID: "c", Owner: "alice", Model: "m", Status: chat.Waiting}
	today := chat.Usage{InputTokens: 1, OutputTokens: 2, CostMicros: 3}
	err = s.InTx(t.Context(), func(tx store.Tx) error {
		if _, err := tx.CreateOwner(t.Context(), "alice"); err != nil {
			return err
		}
		if err := tx.InsertChat(t.Context(), &c); err != nil {
			return err
		}
		return tx.AddUsage(t.Context(), c.ID, today)
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	// Earlier days, written as the ledger would have been then.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer db.Close()
	now := time.Now()
	_, err = db.ExecContext(t.Context(), `INSERT INTO owner_usage (owner, day, input_tokens, output_tokens, cost_micros)
		VALUES ('alice', ?, 10, 20, 30), ('alice', ?, 100, 200, 300)`,
		now.UTC().AddDate(0, 0, -1).Format(time.DateOnly), now.UTC().AddDate(0, 0, -40).Format(time.DateOnly))
	if err != nil {
		t.Fatalf("insert past days: %v", err)
	}
	yesterday := chat.Usage{InputTokens: 10, OutputTokens: 20, CostMicros: 30}
	longAgo := chat.Usage{InputTokens: 100, OutputTokens: 200, CostMicros: 300}
	for _, tc := range []struct {
		name  string
		since time.Time
		want  chat.Usage
	}{
		{"today's start", quota.Day.Start(now), today},
		{"yesterday's last microsecond", quota.Day.Start(now).Add(-time.Microsecond), today.Add(yesterday)},
		{"this time yesterday, in another zone", now.AddDate(0, 0, -1).In(time.FixedZone("west", -11*3600)), today.Add(yesterday)},
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
