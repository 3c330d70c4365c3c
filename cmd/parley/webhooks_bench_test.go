package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestWebhookBench measures webhook delivery by a real parley serve, on
// SQLite and (with PARLEY_TEST_POSTGRES) PostgreSQL, against a receiver on
// loopback that verifies each request and answers 204 at once:
//
//   - latency: a chat's title is changed through the API, one change at a
//     time; from the commit (the event's timestamp, the chat's updated_at)
//     to the receiver, and from sending the PATCH to the receiver; p50 and
//     p99 over the samples.
//   - drain: 10,000 title changes are committed in one transaction straight
//     into the database (the outbox triggers write an event and a delivery
//     for each), and what the receiver has after them all, or after a
//     minute, gives the events per second one endpoint drains.
//
// It is a measurement, run by hand (docs/benchmarks.md has the figures):
//
//	PARLEY_BENCH=1 PARLEY_TEST_POSTGRES=... go test -run TestWebhookBench -v ./cmd/parley/
func TestWebhookBench(t *testing.T) {
	if os.Getenv("PARLEY_BENCH") != "1" {
		t.Skip("a measurement: set PARLEY_BENCH=1")
	}
	const (
		samples, queued = 300, 10_000
		drainBudget     = time.Minute
	)
	run := func(t *testing.T, s *server, fill func(chatID string, n int)) {
		rc := newReceiver(t)
		createWebhook(t, s.url, s.token, rc, `["chat.title_changed"]`)
		id := createTitled(t, s.url, s.token, "title 0")

		var fromCommit, fromRequest []time.Duration
		for i := 1; i <= samples; i++ {
			sent := time.Now()
			retitle(t, s.url, s.token, id, fmt.Sprintf("title %d", i))
			e := rc.waitEvents(i, deadline)[i-1]
			fromCommit = append(fromCommit, e.at.Sub(e.body.Timestamp))
			fromRequest = append(fromRequest, e.at.Sub(sent))
		}
		t.Logf("commit -> receiver over %d events: p50 %v, p99 %v; PATCH sent -> receiver: p50 %v, p99 %v",
			samples, pct(fromCommit, 0.5), pct(fromCommit, 0.99), pct(fromRequest, 0.5), pct(fromRequest, 0.99))

		start := time.Now()
		fill(id, queued)
		committed := time.Now()
		// The drain is measured for at most drainBudget: a slow one is
		// reported with what arrived, not waited for.
		budget := time.NewTimer(drainBudget)
		defer budget.Stop()
		var got int
	wait:
		for {
			evs, _ := rc.snapshot()
			if got = len(evs) - samples; got >= queued {
				break
			}
			select {
			case <-rc.changed:
			case <-budget.C:
				break wait
			}
		}
		took := time.Since(committed)
		_, dups := rc.snapshot()
		t.Logf("drain: %d events queued in %v; %d delivered in %v after the commit: %.0f events/s (%d duplicates)",
			queued, committed.Sub(start).Round(time.Millisecond), got, took.Round(time.Millisecond), float64(got)/took.Seconds(), dups)
		if code := s.stop(); code != 0 {
			t.Errorf("serve exited %d\nstderr:\n%s", code, s.stderr)
		}
	}

	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		dataDir := filepath.Join(dir, "data")
		cfg := fakeModelConfig(t, dir, "http://127.0.0.1:1", webhooksConfig)
		s := startServe(t, dir, []string{fakeKeyEnv + "=test-key"}, "--config", cfg, "--data-dir", dataDir)
		run(t, s, func(chatID string, n int) {
			db, err := sql.Open("sqlite", filepath.Join(dataDir, "parley.db")+"?_busy_timeout=10000&_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if _, err := tx.Exec(`UPDATE chats SET title = ? WHERE id = ?`, fmt.Sprintf("bulk %d", i), chatID); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		dir := t.TempDir()
		cfg := fakeModelConfig(t, dir, "http://127.0.0.1:1", webhooksConfig)
		s := startServe(t, dir, []string{fakeKeyEnv + "=test-key"}, "--database", dsn, "--config", cfg, "--data-dir", filepath.Join(dir, "data"))
		run(t, s, func(chatID string, n int) {
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%d LOOP
				UPDATE chats SET title = 'bulk ' || i WHERE id = '%s'; END LOOP; END $$`, n, chatID)); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// pct is the p-quantile of ds (sorted in place), rounded for reading.
func pct(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(10 * time.Microsecond)
}
