package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/internal/testutil/hookrecv"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
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
//     minute, gives the events per second one endpoint drains; beside it,
//     the floor: the same number of signed POSTs from a bare loop.
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
		rc := hookrecv.New(t)
		createWebhook(t, s.URL, s.Token, rc, `["chat.title_changed"]`)
		id := createTitled(t, s.URL, s.Token, "title 0")

		var fromCommit, fromRequest []time.Duration
		for i := 1; i <= samples; i++ {
			sent := time.Now()
			retitle(t, s.URL, s.Token, id, fmt.Sprintf("title %d", i))
			e := rc.WaitEvents(i, deadline)[i-1]
			fromCommit = append(fromCommit, e.At.Sub(e.Body.Timestamp))
			fromRequest = append(fromRequest, e.At.Sub(sent))
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
			n, _ := rc.Count()
			if got = n - samples; got >= queued {
				break
			}
			select {
			case <-rc.Changed():
			case <-budget.C:
				break wait
			}
		}
		took := time.Since(committed)
		_, dups := rc.Count()
		t.Logf("drain: %d events queued in %v; %d delivered in %v after the commit: %.0f events/s (%d duplicates)",
			queued, committed.Sub(start).Round(time.Millisecond), got, took.Round(time.Millisecond), float64(got)/took.Seconds(), dups)
		if code := s.Stop(); code != 0 {
			t.Errorf("serve exited %d\nstderr:\n%s", code, s.Stderr)
		}
		// The floor: as many signed POSTs of the same size as the drain
		// sent, one at a time from a bare loop, to the same receiver.
		floor := floorRate(t, rc, got)
		t.Logf("floor: a bare loop posting to the receiver: %.0f requests/s; the drain ran at %.2f of it",
			floor, float64(got)/took.Seconds()/floor)
	}

	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		dataDir := filepath.Join(dir, "data")
		cfg := parleybin.FakeModelConfig(t, dir, "http://127.0.0.1:1", webhooksConfig)
		s := startServe(t, dir, []string{parleybin.FakeKeyEnv + "=test-key"}, "--config", cfg, "--data-dir", dataDir)
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
		cfg := parleybin.FakeModelConfig(t, dir, "http://127.0.0.1:1", webhooksConfig)
		s := startServe(t, dir, []string{parleybin.FakeKeyEnv + "=test-key"}, "--database", dsn, "--config", cfg, "--data-dir", filepath.Join(dir, "data"))
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

// floorRate posts n signed requests to the receiver, one at a time, with
// bodies like the drain's, and returns the requests per second.
func floorRate(t *testing.T, rc *hookrecv.Receiver, n int) float64 {
	t.Helper()
	client := &http.Client{}
	body := []byte(`{"type":"chat.title_changed","timestamp":"2026-01-01T00:00:00Z","data":{"id":"00000000-0000-0000-0000-000000000000","owner":"admin","title":"bulk 1","status":"waiting","labels":{},"usage":{"input_tokens":0,"output_tokens":0,"cost_micros":0}}}`)
	start := time.Now()
	for i := range n {
		id := fmt.Sprintf("msg_floor_%d", i)
		now := time.Now()
		sig, err := rc.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, rc.URL(), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			t.Fatalf("floor request %d: HTTP %d", i, res.StatusCode)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// pct is the p-quantile of ds (sorted in place), rounded for reading.
func pct(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(10 * time.Microsecond)
}
