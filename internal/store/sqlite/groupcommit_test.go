package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// TestGroupCommitIsolatesFailures: many transactions at once share commits;
// those that fail or panic leave nothing behind, the others all commit.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	inTx(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(ctx, "alice"); return err })
	errOdd := errors.New("odd ones fail")
	const n = 120
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	panics := make([]any, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { panics[i] = recover() }()
			<-start
			errs[i] = s.InTx(ctx, func(tx store.Tx) error {
				c := chat.Chat{ID: fmt.Sprintf("c%03d", i), Owner: "alice", Model: "m", Status: chat.Waiting}
				if err := tx.InsertChat(ctx, &c); err != nil {
					return err
				}
				switch {
				case i%10 == 3:
					panic(fmt.Sprintf("boom %d", i))
				case i%2 == 1:
					return errOdd
				}
				return nil
			})
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		_, err := s.GetChat(ctx, fmt.Sprintf("c%03d", i))
		switch {
		case i%10 == 3:
			if panics[i] != fmt.Sprintf("boom %d", i) || !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%d: panic %v reached the caller? chat: %v", i, panics[i], err)
			}
		case i%2 == 1:
			if !errors.Is(errs[i], errOdd) || !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%d: InTx %v, chat %v; want its error and no chat", i, errs[i], err)
			}
		default:
			if errs[i] != nil || err != nil {
				t.Errorf("%d: InTx %v, chat %v; want committed", i, errs[i], err)
			}
		}
	}
}

// TestGroupCommitRollsBackACancelledCaller: a caller whose context ends while
// its function runs gets the context's error and leaves nothing behind;
// its statements are not cut off half-way (they run uncancellable, and the
// savepoint is what undoes them).
func TestGroupCommitRollsBackACancelledCaller(t *testing.T) {
	s := openTemp(t)
	inTx(t, s, func(tx store.Tx) error { _, err := tx.CreateOwner(t.Context(), "alice"); return err })
	ctx, cancel := context.WithCancel(t.Context())
	var afterCancel error
	err := s.InTx(ctx, func(tx store.Tx) error {
		a := chat.Chat{ID: "before", Owner: "alice", Model: "m", Status: chat.Waiting}
		if err := tx.InsertChat(ctx, &a); err != nil {
			return err
		}
		cancel()
		b := chat.Chat{ID: "after", Owner: "alice", Model: "m", Status: chat.Waiting}
		afterCancel = tx.InsertChat(ctx, &b)
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("InTx = %v, want context.Canceled", err)
	}
	if afterCancel != nil {
		t.Errorf("a statement after the cancel failed: %v", afterCancel)
	}
	for _, id := range []string{"before", "after"} {
		if _, err := s.GetChat(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("chat %q of the cancelled caller: %v, want not found", id, err)
		}
	}
}

// TestAfterCommitInCommitOrder: the AfterCommit functions of transactions
// that share commits run in commit order: writes that each change one chat
// (its version grows with each) see their versions announced in increasing
// order, so local subscribers get events in the order they happened.
func TestAfterCommitInCommitOrder(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	c := chat.Chat{ID: "c", Owner: "alice", Model: "m", Status: chat.Waiting}
	inTx(t, s, func(tx store.Tx) error {
		if _, err := tx.CreateOwner(ctx, "alice"); err != nil {
			return err
		}
		return tx.InsertChat(ctx, &c)
	})
	const n = 30
	var (
		mu        sync.Mutex
		announced []int64
		wg        sync.WaitGroup
	)
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.InTx(ctx, func(tx store.Tx) error {
				got, err := tx.LockChat(ctx, c.ID)
				if err != nil {
					return err
				}
				got.Title = fmt.Sprint("title ", i)
				if err := tx.UpdateChatMeta(ctx, &got); err != nil {
					return err
				}
				tx.AfterCommit(func() {
					mu.Lock()
					announced = append(announced, got.Version)
					mu.Unlock()
				})
				return nil
			})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if len(announced) != n || !slices.IsSorted(announced) || len(slices.Compact(slices.Clone(announced))) != n {
		t.Fatalf("versions announced %v, want %d, in increasing order", announced, n)
	}
}
