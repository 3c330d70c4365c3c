package postgres_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/postgres"
	"github.com/parleyhq/parley/internal/pubsub/pubsubtest"
)

const waitFor = 10 * time.Second

func TestConformance(t *testing.T) {
	pubsubtest.Run(t, func(t *testing.T) pubsub.PubSub {
		_, pool := testDB(t)
		return open(t, pool, postgres.WithChannel(uniqueName()))
	})
}

func TestShared(t *testing.T) {
	pubsubtest.RunShared(t, func(t *testing.T) (a, b pubsub.PubSub) {
		dsn, pool := testDB(t)
		channel := postgres.WithChannel(uniqueName())
		return open(t, pool, channel), open(t, openPool(t, dsn), channel)
	})
}

// TestReconnect kills the listening connection and checks that subscribers
// are told they may have missed messages, and that messages flow again.
func TestReconnect(t *testing.T) {
	dsn, poolA := testDB(t)
	channel := postgres.WithChannel(uniqueName())
	app := uniqueName()
	logs := &syncBuffer{}
	a := openWith(t, poolA, slog.New(slog.NewTextHandler(logs, nil)), channel, postgres.WithApplicationName(app))
	b := open(t, openPool(t, dsn), channel)
	sub := subscribe(t, a, "t")
	other := subscribe(t, a, "other")

	var killed int
	err := poolA.QueryRow(t.Context(),
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminate listener: killed %d connections, err %v; want 1", killed, err)
	}
	for _, s := range []pubsub.Subscription{sub, other} {
		if m := receive(t, s); !m.Missed {
			t.Fatalf("after the listener died got %+v, want a Missed marker", m)
		}
	}
	// The marker is sent once the channel is listened to again, so what b
	// publishes now must reach a.
	if err := b.Publish(t.Context(), "t", []byte("from b")); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, sub); string(m.Payload) != "from b" {
		t.Fatalf("after reconnect got %+v, want %q", m, "from b")
	}
	if err := a.Publish(t.Context(), "t", []byte("from a")); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, sub); string(m.Payload) != "from a" {
		t.Fatalf("after reconnect got %+v, want %q", m, "from a")
	}
	if !strings.Contains(logs.String(), "reconnected") {
		t.Errorf("reconnection not logged; logs:\n%s", logs.String())
	}
}

// TestLostPayloadBecomesMissed sends notifications that cannot be delivered
// and checks that subscribers are told, rather than left unaware.
func TestLostPayloadBecomesMissed(t *testing.T) {
	_, pool := testDB(t)
	channel := uniqueName()
	ps := open(t, pool, postgres.WithChannel(channel))
	sub := subscribe(t, ps, "t")
	other := subscribe(t, ps, "other")

	// A reference to a stored payload that no longer exists: only the
	// topic's subscribers are told.
	topic := base64.StdEncoding.EncodeToString([]byte("t"))
	notify(t, pool, channel, fmt.Sprintf(`{"o":"elsewhere","m":[{"t":%q,"r":999999999}]}`, topic))
	if m := receive(t, sub); !m.Missed || m.Topic != "t" {
		t.Fatalf("after a lost payload got %+v, want a Missed marker on %q", m, "t")
	}
	// Something that is not a notification of ours, or one in an older
	// replica's format: the topic is unknown, so everybody is told.
	for _, bad := range []string{"garbage", fmt.Sprintf(`{"o":"elsewhere","t":%q,"p":"eA=="}`, topic)} {
		notify(t, pool, channel, bad)
		for _, s := range []pubsub.Subscription{sub, other} {
			if m := receive(t, s); !m.Missed {
				t.Fatalf("after the malformed notification %q got %+v, want a Missed marker", bad, m)
			}
		}
	}
}

// TestCleanupDeletesOldPayloads checks that stored payloads older than the
// TTL are deleted and newer ones kept.
func TestCleanupDeletesOldPayloads(t *testing.T) {
	_, pool := testDB(t)
	var oldID, newID int64
	err := pool.QueryRow(t.Context(),
		"INSERT INTO pubsub_payloads (payload, created_at) VALUES ('old', now() - interval '1 hour') RETURNING id").Scan(&oldID)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(t.Context(),
		"INSERT INTO pubsub_payloads (payload) VALUES ('new') RETURNING id").Scan(&newID); err != nil {
		t.Fatal(err)
	}
	open(t, pool, postgres.WithChannel(uniqueName()),
		postgres.WithPayloadTTL(time.Minute), postgres.WithCleanupInterval(10*time.Millisecond))

	exists := func(id int64) bool {
		var ok bool
		if err := pool.QueryRow(t.Context(),
			"SELECT EXISTS (SELECT 1 FROM pubsub_payloads WHERE id = $1)", id).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	deadline := time.Now().Add(waitFor)
	for exists(oldID) {
		if time.Now().After(deadline) {
			t.Fatalf("expired payload still stored after %v", waitFor)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	if !exists(newID) {
		t.Fatal("cleanup deleted a payload younger than the TTL")
	}
}

// TestLargePayloadStoredOnce checks that a large payload goes through the
// table and a small one does not.
func TestLargePayloadStoredOnce(t *testing.T) {
	_, pool := testDB(t)
	ps := open(t, pool, postgres.WithChannel(uniqueName()))
	count := func() (n int) {
		if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pubsub_payloads").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := ps.Publish(t.Context(), "t", []byte("small")); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("a small payload stored %d rows", n)
	}
	if err := ps.Publish(t.Context(), "t", bytes.Repeat([]byte{0}, 10_000)); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("a large payload stored %d rows, want 1", n)
	}
}

// TestCloseLeaksNoGoroutines runs an instance through a reconnection and
// checks that Close stops everything it started.
func TestCloseLeaksNoGoroutines(t *testing.T) {
	_, pool := testDB(t)
	before := runtime.NumGoroutine()
	app := uniqueName()
	ps, err := postgres.New(t.Context(), pool, testLogger(t),
		postgres.WithChannel(uniqueName()), postgres.WithApplicationName(app),
		postgres.WithCleanupInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sub, err := ps.Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(),
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, sub); !m.Missed {
		t.Fatalf("got %+v, want a Missed marker", m)
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitFor)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before New, %d after Close:\n%s",
				before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}

func open(t *testing.T, pool *pgxpool.Pool, opts ...postgres.Option) *postgres.PubSub {
	t.Helper()
	return openWith(t, pool, testLogger(t), opts...)
}

func openWith(t *testing.T, pool *pgxpool.Pool, log *slog.Logger, opts ...postgres.Option) *postgres.PubSub {
	t.Helper()
	ps, err := postgres.New(t.Context(), pool, log, opts...)
	if err != nil {
		t.Fatalf("postgres.New: %v", err)
	}
	t.Cleanup(func() { ps.Close() })
	return ps
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func subscribe(t *testing.T, ps pubsub.PubSub, topic string) pubsub.Subscription {
	t.Helper()
	sub, err := ps.Subscribe(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return sub
}

func receive(t *testing.T, sub pubsub.Subscription) pubsub.Message {
	t.Helper()
	select {
	case m, ok := <-sub.C():
		if !ok {
			t.Fatalf("subscription ended: %v", sub.Err())
		}
		return m
	case <-time.After(waitFor):
		t.Fatalf("no message within %v", waitFor)
	}
	panic("unreachable")
}

func notify(t *testing.T, pool *pgxpool.Pool, channel, payload string) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), "SELECT pg_notify($1, $2)", channel, payload); err != nil {
		t.Fatal(err)
	}
}

// uniqueName returns a fresh lower-case identifier, for NOTIFY channels and
// application names: both are database-wide, and tests run side by side.
func uniqueName() string {
	return "pubsub_test_" + strings.ToLower(rand.Text()[:12])
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
