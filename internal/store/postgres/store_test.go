package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/postgres"
	"github.com/parleyhq/parley/internal/store/storetest"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// open connects a store to dsn and closes it when t ends.
func open(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openMigrated opens a migrated store on a fresh schema.
func openMigrated(t *testing.T) *postgres.Store {
	t.Helper()
	s := open(t, pgtest.DSN(t))
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// TestMain drops the pooled schemas of the conformance tests when they are
// over.
func TestMain(m *testing.M) { pgtest.Main(m) }

// openPooled opens a store on a migrated, empty schema that the tests of
// this package share one after another (pgtest.MigratedDSN).
func openPooled(t *testing.T) *postgres.Store {
	t.Helper()
	dsn := pgtest.MigratedDSN(t, func(ctx context.Context, dsn string) error {
		s, err := postgres.Open(ctx, dsn)
		if err != nil {
			return err
		}
		defer s.Close()
		return s.Migrate(ctx)
	})
	return open(t, dsn)
}

func TestConformance(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, func(t *testing.T) store.Store { return openPooled(t) })
}

func TestMigrateTwiceIsNoOp(t *testing.T) {
	s := openMigrated(t)
	inTx(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), "alice"); return err })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if n, err := s.CountOwners(t.Context()); err != nil || n != 1 {
		t.Fatalf("after the second Migrate: %d owners, %v", n, err)
	}
}

// TestConcurrentMigrate: replicas starting together on an empty schema all
// migrate without error.
func TestConcurrentMigrate(t *testing.T) {
	dsn := pgtest.DSN(t)
	const replicas = 3
	stores := make([]*postgres.Store, replicas)
	for i := range stores {
		stores[i] = open(t, dsn)
	}
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: Migrate: %v", i, err)
		}
	}
	inTx(t, stores[0], func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), "alice"); return err })
	if n, err := stores[1].CountOwners(t.Context()); err != nil || n != 1 {
		t.Fatalf("replicas disagree: %d owners, %v", n, err)
	}
}

func TestPubsubPayloadsTable(t *testing.T) {
	s := openMigrated(t)
	var id int64
	err := s.Pool().QueryRow(t.Context(), `INSERT INTO pubsub_payloads (payload) VALUES ($1) RETURNING id`, []byte("x")).Scan(&id)
	if err != nil || id == 0 {
		t.Fatalf("insert into pubsub_payloads: id %d, %v", id, err)
	}
}

// TestInTxRetriesDeadlock: two transactions that lock two chats in opposite
// orders deadlock; PostgreSQL aborts one, and InTx runs it again, so both
// succeed.
func TestInTxRetriesDeadlock(t *testing.T) {
	s := openMigrated(t)
	inTx(t, s, func(tx store.Tx) error {
		if _, err := tx.CreateOwner(t.Context(), "alice"); err != nil {
			return err
		}
		for _, id := range []string{"a", "b"} {
			c := chat.Chat{ID: id, Owner: "alice", Model: "m", Status: chat.Waiting}
			if err := tx.InsertChat(t.Context(), &c); err != nil {
				return err
			}
		}
		return nil
	})
	var attempts atomic.Int32
	var bothLocked sync.WaitGroup
	bothLocked.Add(2)
	run := func(first, second string) error {
		firstAttempt := true
		return s.InTx(t.Context(), func(tx store.Tx) error {
			attempts.Add(1)
			if _, err := tx.LockChat(t.Context(), first); err != nil {
				return err
			}
			if firstAttempt {
				// Both hold their first lock before either asks for its second.
				firstAttempt = false
				bothLocked.Done()
				bothLocked.Wait()
			}
			_, err := tx.LockChat(t.Context(), second)
			return err
		})
	}
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { errA = run("a", "b") })
	wg.Go(func() { errB = run("b", "a") })
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("transactions still blocked after 20s")
	}
	if errA != nil || errB != nil {
		t.Fatalf("InTx: %v / %v; want both to succeed after a retry", errA, errB)
	}
	if n := attempts.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3 (one deadlock victim retried once)", n)
	}
}

func TestOpenUnreachable(t *testing.T) {
	_, err := postgres.Open(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if err == nil {
		t.Fatal("Open of an unreachable database: no error")
	}
	if errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unexpected store error: %v", err)
	}
}

func inTx(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.InTx(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// TestTransactionsSurviveTerminatedConnections: every connection of the
// pool is terminated (as a restart or a network cut would), and the next
// transactions still commit, each once, on fresh connections; so does a
// transaction whose connection dies in its middle, run again from the
// start.
func TestTransactionsSurviveTerminatedConnections(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		inTx(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), fmt.Sprint("warm", round)); return err })
		if n := pgtest.TerminateBackends(t, dsn); n == 0 {
			t.Fatal("no connection to terminate")
		}
		inTx(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), fmt.Sprint("after", round)); return err })
	}

	attempts := 0
	inTx(t, s, func(tx store.Tx) error {
		attempts++
		if _, err := tx.CreateOwner(t.Context(), "midway"); err != nil {
			return err
		}
		if attempts == 1 {
			pgtest.TerminateBackends(t, dsn)
		}
		_, err := tx.CreateOwner(t.Context(), "midway-2")
		return err
	})
	if attempts != 2 {
		t.Fatalf("fn ran %d times, want 2 (once cut, once committed)", attempts)
	}
	if n, err := s.CountOwners(t.Context()); err != nil || n != 8 {
		t.Fatalf("%d owners, %v; want 8", n, err)
	}
}

// TestUnavailableErrors: what the store reports for a database it cannot
// reach wraps store.ErrUnavailable, so the API answers 503.
func TestUnavailableErrors(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := open(t, dsn)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A transaction that cuts its own connection in every attempt gives up
	// with ErrUnavailable.
	err := s.InTx(t.Context(), func(tx store.Tx) error {
		pgtest.TerminateBackends(t, dsn)
		_, err := tx.CreateOwner(t.Context(), "never")
		return err
	})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("InTx on a connection cut each time: %v, want store.ErrUnavailable", err)
	}
}
