package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestRecoveryLatency measures, when PARLEY_BENCH_RECOVERY holds a number
// of samples, how long a chat waits after a SIGKILL of the replica running
// it before another replica holds its lease: from the kill to the new
// lease, read from the database, with the default engine settings. Each
// sample kills the holder mid-answer and starts it again. It prints the
// median, p99 and max; it asserts only that every sample recovered before
// the lease (15 s) could expire. It is a measurement, run by hand:
//
//	PARLEY_TEST_POSTGRES=... PARLEY_BENCH_RECOVERY=50 go test -run TestRecoveryLatency -v ./cmd/parley/
func TestRecoveryLatency(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PARLEY_BENCH_RECOVERY"))
	if n <= 0 {
		t.Skip("a measurement: set PARLEY_BENCH_RECOVERY to a number of samples")
	}
	dsn := pgtest.DSN(t)
	pgtest.Store(t, dsn)
	fake := llmtest.NewOpenAIChat(t)
	dir := t.TempDir()
	a, b := startReplicas(t, dir, dsn, parleybin.FakeModelConfig(t, dir, fake.URL, ""))
	reps := []*replica{a, b}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	var took []time.Duration
	for i := range n {
		fake.Push(
			llmtest.Turn{Text: "an answer the kill cuts", ChunkSize: 4, HoldAfter: 2},
			llmtest.Turn{Text: "the answer"},
		)
		id := createChatWith(t, reps[0], fmt.Sprintf("sample %d", i))
		held, other := holder(t, dsn, id, reps[0], reps[1])
		// The kill comes mid-answer: the model has the holder's request.
		for len(fake.Requests()) < 2*i+1 {
			time.Sleep(2 * time.Millisecond)
		}
		var gen int64
		if err := conn.QueryRow(ctx, `SELECT lease_generation FROM chats WHERE id = $1`, id).Scan(&gen); err != nil {
			t.Fatal(err)
		}
		if err := held.Cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		for {
			var now int64
			var worker string
			if err := conn.QueryRow(ctx, `SELECT lease_generation, worker_id FROM chats WHERE id = $1`, id).Scan(&now, &worker); err != nil {
				t.Fatal(err)
			}
			if now > gen && worker != "" {
				took = append(took, time.Since(killed))
				break
			}
			if time.Since(killed) > 15*time.Second {
				t.Fatalf("sample %d: no new lease 15 s after the kill\nstderr:\n%s", i, other.Stderr)
			}
			time.Sleep(5 * time.Millisecond)
		}
		held.Wait()
		// The killed replica comes back, as a supervisor would start it.
		name := fmt.Sprintf("r%d", i)
		s := startServe(t, dir, []string{parleybin.FakeKeyEnv + "=test-key"}, "--database", dsn, "--config", filepath.Join(dir, "parley.yaml"), "--data-dir", filepath.Join(dir, name))
		restarted := &replica{server: s, worker: workerID(t, s)}
		restarted.Token = a.Token
		reps = []*replica{other, restarted}
		if !waitChatStatus(conn, id, chat.Waiting) {
			var worker string
			var gen int64
			conn.QueryRow(ctx, `SELECT worker_id, lease_generation FROM chats WHERE id = $1`, id).Scan(&worker, &gen)
			t.Logf("the chat is held by %q (generation %d); other %s, restarted %s", worker, gen, other.worker, restarted.worker)
			t.Fatalf("sample %d: chat %s did not finish; the model got %d requests\nother stderr:\n%s\nrestarted stderr:\n%s", i, id, len(fake.Requests()), other.Stderr, restarted.Stderr)
		}
	}
	slices.Sort(took)
	q := func(p float64) time.Duration { return took[min(len(took)-1, int(p*float64(len(took))))] }
	t.Logf("kill -9 -> new lease over %d samples: median %v, p99 %v, max %v (default engine settings: lease_ttl 15s)",
		len(took), q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// waitChatStatus waits until the chat is in want, and reports whether it
// got there before the deadline.
func waitChatStatus(conn *pgx.Conn, id string, want chat.Status) bool {
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		var status string
		if err := conn.QueryRow(context.Background(), `SELECT status FROM chats WHERE id = $1`, id).Scan(&status); err == nil && status == string(want) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
