package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestConcurrentAcquireKeepsMaxRunning: replicas acquiring at the same
// moment never start more of an owner's chats than its max_running, as
// counted in the database after every round.
func TestConcurrentAcquireKeepsMaxRunning(t *testing.T) {
	pgtest.Require(t)
	const (
		maxRunning = 3
		perOwner   = 50
		acquirers  = 3 // per replica
	)
	dsn := pgtest.DSN(t)
	s1 := open(t, dsn)
	if err := s1.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	replicas := []store.Store{s1, open(t, dsn)}
	db, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { db.Close(t.Context()) })

	owners := []string{"a", "b"}
	inTx(t, s1, func(tx store.Tx) error {
		for _, o := range owners {
			if _, err := tx.CreateOwner(t.Context(), o); err != nil {
				return err
			}
			for i := range perOwner {
				c := chat.Chat{ID: fmt.Sprintf("%s-%03d", o, i), Owner: o, Model: "m", Status: chat.Pending}
				if err := tx.InsertChat(t.Context(), &c); err != nil {
					return err
				}
			}
		}
		return nil
	})

	taken := map[string]bool{}
	for round := 0; len(taken) < len(owners)*perOwner; round++ {
		if round > 2*perOwner {
			t.Fatalf("only %d chats taken after %d rounds", len(taken), round)
		}
		start := make(chan struct{})
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			got []chat.Chat
		)
		for _, s := range replicas {
			for w := range acquirers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					cs, _, err := s.AcquireChats(t.Context(), store.Acquire{
						WorkerID: fmt.Sprintf("w%d", w), TTL: time.Hour, Max: 2, MaxRunning: maxRunning})
					if err != nil {
						t.Errorf("AcquireChats: %v", err)
					}
					mu.Lock()
					got = append(got, cs...)
					mu.Unlock()
				}()
			}
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		for _, c := range got {
			if taken[c.ID] {
				t.Fatalf("round %d: chat %s taken twice", round, c.ID)
			}
			taken[c.ID] = true
		}
		for _, o := range owners {
			var running, pending int
			err := db.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE status = 'running'),
				count(*) FILTER (WHERE status = 'pending') FROM chats WHERE owner = $1`, o).Scan(&running, &pending)
			if err != nil {
				t.Fatalf("count: %v", err)
			}
			if running > maxRunning {
				t.Fatalf("round %d: owner %s has %d chats running, max_running is %d", round, o, running, maxRunning)
			}
			if pending > 0 && running < maxRunning {
				t.Fatalf("round %d: owner %s has %d chats running and %d pending, want %d running", round, o, running, pending, maxRunning)
			}
			// One run ends: one slot for the next round's acquirers to
			// compete for.
			var id string
			err = db.QueryRow(t.Context(), `SELECT id FROM chats WHERE owner = $1 AND status = 'running'
				ORDER BY id LIMIT 1`, o).Scan(&id)
			if err == pgx.ErrNoRows {
				continue
			}
			if err != nil {
				t.Fatalf("running chat: %v", err)
			}
			inTx(t, s1, func(tx store.Tx) error {
				_, err := tx.TransitionChat(t.Context(), id, store.Transition{From: chat.Running, To: chat.Waiting})
				return err
			})
		}
	}
}
