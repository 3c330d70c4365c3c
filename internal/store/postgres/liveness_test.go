package postgres_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/store/postgres"
)

// holder holds a worker's liveness, on one session, until the test ends,
// stop is called or the session is lost (err).
type holder struct {
	held chan struct{} // closed once the lock is held
	stop context.CancelFunc
	done chan struct{} // closed when HoldLiveness returned, with err
	err  error
}

func hold(t *testing.T, s *postgres.Store, worker string) *holder {
	ctx, cancel := context.WithCancel(context.Background())
	h := &holder{held: make(chan struct{}), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		h.err = s.HoldLiveness(ctx, worker, func() { close(h.held) })
	}()
	t.Cleanup(func() { cancel(); <-h.done })
	select {
	case <-h.held:
	case <-h.done:
		t.Fatalf("liveness not held: %v", h.err)
	case <-time.After(15 * time.Second):
		t.Fatal("liveness not held after 15s")
	}
	return h
}

// runningFor makes a pending chat and has worker acquire it.
func runningFor(t *testing.T, s store.Store, worker string) chat.Chat {
	t.Helper()
	inTx(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), "alice"); return err })
	c := chat.Chat{ID: "chat-of-the-worker", Owner: "alice", Model: "m", Status: chat.Pending}
	inTx(t, s, func(tx store.Tx) error { return tx.InsertChat(t.Context(), &c) })
	cs, _, err := s.AcquireChats(t.Context(), store.Acquire{WorkerID: worker, TTL: time.Hour, Max: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("acquire: %v, %d chats", err, len(cs))
	}
	return cs[0]
}

// TestLivenessOfADeadWorker: a worker that holds its liveness is not dead,
// however long its lease; once its session ends, it is, and its chats are
// recovered at once (the lease, an hour long, has not expired).
func TestLivenessOfADeadWorker(t *testing.T) {
	s := openMigrated(t)
	// Advisory locks are the database's, shared by every test's schema: the
	// worker id is this test's own.
	w := "w1-" + t.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c := runningFor(t, s, w)
	h := hold(t, s, w)
	if dead, err := s.DeadWorkers(t.Context()); err != nil || len(dead) != 0 {
		t.Fatalf("dead workers while %s holds its liveness: %v, %v", w, dead, err)
	}
	if ids, err := s.RecoverWorkers(t.Context(), []string{w}, true); err != nil || len(ids) != 0 {
		t.Fatalf("recovered %v (%v) while %s lives", ids, err, w)
	}
	h.stop() // the process ends: its session with it
	<-h.done
	// The server ends the session (and frees the lock) a moment after the
	// connection closed.
	var dead []string
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if dead, err = s.DeadWorkers(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(dead) > 0 || time.Now().After(end) {
			break
		}
	}
	if !slices.Equal(dead, []string{w}) {
		t.Fatalf("dead workers after %s's session ended: %v", w, dead)
	}
	ids, err := s.RecoverWorkers(t.Context(), dead, true)
	if err != nil || !slices.Equal(ids, []string{c.ID}) {
		t.Fatalf("recovered %v, %v; want %s", ids, err, c.ID)
	}
	got, err := s.GetChat(t.Context(), c.ID)
	if err != nil || got.Status != chat.Pending || got.WorkerID != "" || got.LeaseRecoveries != 1 {
		t.Fatalf("recovered chat: %+v, %v", got, err)
	}
}

// TestLivenessSessionCutIsNoticed: the worker's liveness session is
// terminated while its process lives: HoldLiveness returns with an error
// at once, so the worker stops its runs.
func TestLivenessSessionCutIsNoticed(t *testing.T) {
	s := openMigrated(t)
	w := "w2-" + t.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	h := hold(t, s, w)
	var cut int
	err := s.Pool().QueryRow(t.Context(), `SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)`, w).Scan(&cut)
	if err != nil || cut != 1 {
		t.Fatalf("terminate %s's liveness session: %d, %v", w, cut, err)
	}
	select {
	case <-h.done:
		if h.err == nil {
			t.Fatal("HoldLiveness returned no error for a lost session")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lost session was not noticed within 10s")
	}
}
