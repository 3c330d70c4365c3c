package service

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestMaxChatsCountedUnderTheOwnersLock: two creations of an owner one
// chat below max_chats, each made to wait after its count until the other
// has reached the owner's lock (or, without one, counted too): exactly one
// passes. Counted without the lock, both saw room and both were created.
// PostgreSQL only: SQLite runs one writing transaction at a time, so the
// second cannot get that far while the first waits.
func TestMaxChatsCountedUnderTheOwnersLock(t *testing.T) {
	base := pgtest.Store(t, pgtest.Migrated(t))
	ctx := context.Background()
	if _, _, err := auth.Issue(ctx, base, "alice", "test"); err != nil {
		t.Fatal(err)
	}
	if err := base.InTx(ctx, func(tx store.Tx) error {
		return tx.SetOwnerQuotas(ctx, "alice", quota.Overrides{MaxChats: new(1)})
	}); err != nil {
		t.Fatal(err)
	}
	st := &meetingStore{Store: base, both: make(chan struct{})}
	s := budgetService(t, st, &quota.Budget{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_, err := s.CreateChat(ctx, "alice", NewChat{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	created := 0
	for err := range errs {
		var ce *quota.CapError
		switch {
		case err == nil:
			created++
		case !errors.As(err, &ce) || ce.Key != "max_chats":
			t.Fatalf("CreateChat: %v, want nil or a max_chats *quota.CapError", err)
		}
	}
	if n, err := base.CountChats(ctx, "alice"); err != nil || created != 1 || n != 1 {
		t.Fatalf("%d creations passed, alice has %d chats (%v); want 1 and 1", created, n, err)
	}
}

// meetingStore holds each transaction, after it counted the owner's chats,
// until the other transaction arrived: at the owner's lock, or at its own
// count when it took no lock.
type meetingStore struct {
	store.Store
	mu      sync.Mutex
	arrived int
	both    chan struct{} // closed when the second arrives
}

func (m *meetingStore) arrive() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.arrived++; m.arrived == 2 {
		close(m.both)
	}
}

func (m *meetingStore) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return m.Store.InTx(ctx, func(tx store.Tx) error { return fn(&meetingTx{Tx: tx, m: m}) })
}

type meetingTx struct {
	store.Tx
	m      *meetingStore
	locked bool
}

func (t *meetingTx) LockOwner(ctx context.Context, owner string) error {
	t.locked = true
	t.m.arrive()
	return t.Tx.LockOwner(ctx, owner)
}

func (t *meetingTx) CountChats(ctx context.Context, owner string) (int, error) {
	n, err := t.Tx.CountChats(ctx, owner)
	if !t.locked {
		t.m.arrive()
	}
	select {
	case <-t.m.both:
	case <-time.After(10 * time.Second): // never, unless the two cannot meet
		return 0, errors.New("the other creation never arrived")
	}
	return n, err
}
