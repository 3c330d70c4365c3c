package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var leaseTests = map[string]func(*testing.T, opener){
	"AcquireNothingPending":            testAcquireNothingPending,
	"AcquireOldestFirst":               testAcquireOldestFirst,
	"AcquireInvalid":                   testAcquireInvalid,
	"AcquireSeveral":                   testAcquireSeveral,
	"ConcurrentAcquireOnce":            testConcurrentAcquire,
	"RenewExtendsAndInterrupt":         testRenew,
	"RenewLost":                        testRenewLost,
	"RecoverExpiredOnce":               testRecoverExpiredOnce,
	"RecoveriesCountedAndReset":        testRecoveriesCounted,
	"HasPendingSeesLockedChats":        testHasPending,
	"LostLeaseWritesNothing":           testLostLeaseWritesNothing,
	"FencedFinalWrite":                 testFencedFinalWrite,
	"FinalWriteSeesQueuedWhileWaiting": testFinalWriteSeesQueued,
	"LeavingRunningEndsLease":          testLeavingRunningEndsLease,
	"ExpiredActions":                   testExpiredActions,
	"ExpiredActionsLimitAndInTx":       testExpiredActionsLimit,
}

// longTTL is a lease that does not expire during a test.
const longTTL = time.Hour

// clockSlack is how far the database's clock (PostgreSQL) may be from the
// test's when a test checks a lease expiry.
const clockSlack = 5 * time.Second

// acquireOne acquires at most one chat, with store.ErrNotFound when none is
// pending.
func acquireOne(ctx context.Context, s store.Store, worker string, ttl time.Duration) (chat.Chat, store.Lease, error) {
	cs, ls, err := s.AcquireChats(ctx, store.Acquire{WorkerID: worker, TTL: ttl, Max: 1})
	switch {
	case err != nil:
		return chat.Chat{}, store.Lease{}, err
	case len(cs) == 0:
		return chat.Chat{}, store.Lease{}, store.ErrNotFound
	case len(cs) > 1 || len(ls) != 1:
		return chat.Chat{}, store.Lease{}, fmt.Errorf("AcquireChats(max 1) took %d chats and %d leases", len(cs), len(ls))
	}
	return cs[0], ls[0], nil
}

// acquire acquires a chat for worker and fails the test on error.
func acquire(t *testing.T, s store.Store, worker string, ttl time.Duration) (chat.Chat, store.Lease) {
	t.Helper()
	c, l, err := acquireOne(t.Context(), s, worker, ttl)
	if err != nil {
		t.Fatalf("acquire one chat (%s): %v", worker, err)
	}
	return c, l
}

// fence runs Fence in a transaction of its own and returns its error.
func fence(t *testing.T, s store.Store, l store.Lease) error {
	t.Helper()
	return txErr(t, s, func(tx store.Tx) error { return tx.Fence(t.Context(), l) })
}

// fencedAppend appends a message the way a worker does: Fence first, and
// nothing more when it fails.
func fencedAppend(t *testing.T, s store.Store, l store.Lease, text string) error {
	t.Helper()
	return txErr(t, s, func(tx store.Tx) error {
		if err := tx.Fence(t.Context(), l); err != nil {
			return err
		}
		m := textMessage(l.ChatID, text)
		return tx.InsertMessage(t.Context(), &m)
	})
}

// fencedFinish ends a run the way a worker does at the end of a step:
// Fence, the step's messages under reserved ids, then the status change
// from running to waiting with their usage. It returns the chat after the
// change and the messages as inserted.
func fencedFinish(t *testing.T, s store.Store, l store.Lease, texts ...string) (chat.Chat, []chat.Message, error) {
	t.Helper()
	ids, err := s.ReserveMessageIDs(t.Context(), len(texts))
	if err != nil {
		t.Fatalf("reserve %d message ids: %v", len(texts), err)
	}
	var (
		after chat.Chat
		msgs  []chat.Message
	)
	err = txErr(t, s, func(tx store.Tx) error {
		msgs = msgs[:0]
		if err := tx.Fence(t.Context(), l); err != nil {
			return err
		}
		var usage chat.Usage
		for i, text := range texts {
			m := chat.Message{ID: ids[i], ChatID: l.ChatID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(text)},
				Usage: &chat.Usage{InputTokens: 10, OutputTokens: int64(i + 1)}}
			if err := tx.InsertMessage(t.Context(), &m); err != nil {
				return err
			}
			usage = usage.Add(*m.Usage)
			msgs = append(msgs, m)
		}
		var err error
		after, err = tx.TransitionChat(t.Context(), l.ChatID, store.Transition{From: chat.Running, To: chat.Waiting, AddUsage: usage})
		return err
	})
	return after, msgs, err
}

// wantExpiry fails the test unless the chat's lease expires ttl after a
// moment between before and after (give or take clockSlack).
func wantExpiry(t *testing.T, what string, c chat.Chat, before, after time.Time, ttl time.Duration) {
	t.Helper()
	exp := c.LeaseExpiresAt
	if exp == nil || exp.Before(before.Add(ttl-clockSlack)) || exp.After(after.Add(ttl+clockSlack)) {
		t.Fatalf("%s: lease expires at %v, want about %v after [%v, %v]", what, exp, ttl, before, after)
	}
}

func testAcquireNothingPending(t *testing.T, open opener) {
	s := open(t)
	_, _, err := acquireOne(t.Context(), s, "w1", longTTL)
	wantErr(t, "acquiring on an empty store", err, store.ErrNotFound)

	addOwner(t, s, "alice")
	var others []chat.Chat
	for _, st := range chat.Statuses {
		if st != chat.Pending {
			others = append(others, addChat(t, s, chat.Chat{Status: st}))
		}
	}
	_, _, err = acquireOne(t.Context(), s, "w1", longTTL)
	wantErr(t, "acquiring with no pending chat", err, store.ErrNotFound)
	for _, c := range others {
		wantEqual(t, "chat after a failed acquisition", getChat(t, s, c.ID), stored(c))
	}
}

// testAcquireOldestFirst: chats are acquired in updated_at order (not
// creation order), each set running under a new lease; other fields,
// interrupt_requested among them, are left alone.
func testAcquireOldestFirst(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	late := addChat(t, s, chat.Chat{ID: "late", Status: chat.Waiting})
	clockPast(t, late.UpdatedAt)
	first := addChat(t, s, chat.Chat{ID: "first", Status: chat.Pending, LeaseGeneration: 4, InterruptRequested: true})
	clockPast(t, first.UpdatedAt)
	second := addChat(t, s, chat.Chat{ID: "second", Status: chat.Pending, Title: "t", Labels: map[string]string{"k": "v"}})
	clockPast(t, second.UpdatedAt)
	late = mustTransition(t, s, late.ID, store.Transition{From: chat.Waiting, To: chat.Pending})

	for i, want := range []chat.Chat{first, second, late} {
		worker := fmt.Sprintf("w%d", i)
		before := now()
		got, l, err := acquireOne(t.Context(), s, worker, longTTL)
		after := now()
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		if got.ID != want.ID {
			t.Fatalf("acquisition %d took %s, want %s (oldest updated_at first)", i, got.ID, want.ID)
		}
		wantEqual(t, "lease", l, store.Lease{ChatID: want.ID, WorkerID: worker, Generation: want.LeaseGeneration + 1})
		wantExpiry(t, "acquired chat", got, before, after, longTTL)
		w := stored(want)
		w.Status, w.WorkerID, w.LeaseGeneration = chat.Running, worker, want.LeaseGeneration+1
		w.LeaseExpiresAt, w.UpdatedAt, w.Version = got.LeaseExpiresAt, got.UpdatedAt, want.Version+1
		wantEqual(t, "acquired chat", got, w)
		wantEqual(t, "stored chat", getChat(t, s, want.ID), w)
	}
	_, _, err := acquireOne(t.Context(), s, "w9", longTTL)
	wantErr(t, "acquiring after every chat was taken", err, store.ErrNotFound)
}

func testAcquireInvalid(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Pending})
	for _, tc := range []struct {
		worker string
		ttl    time.Duration
	}{{"", longTTL}, {"w1", 0}, {"w1", -time.Second}} {
		if _, _, err := s.AcquireChats(t.Context(), store.Acquire{WorkerID: "w1", TTL: longTTL, Max: 0}); err == nil {
			t.Fatal("AcquireChats of 0 chats must be refused")
		}
		_, _, err := acquireOne(t.Context(), s, tc.worker, tc.ttl)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("AcquireChats(%q, %v): %v, want an invalid-argument error", tc.worker, tc.ttl, err)
		}
	}
	wantEqual(t, "chat after refused acquisitions", getChat(t, s, c.ID), stored(c))
}

// testConcurrentAcquire: acquirers racing for pending chats, each until it
// finds none, take every chat exactly once.
func testConcurrentAcquire(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	const chats = 40
	for range chats {
		addChat(t, s, chat.Chat{Status: chat.Pending})
	}
	leases := make([][]store.Lease, concurrency)
	errs := runTogether(concurrency, func(i int) error {
		for {
			_, l, err := acquireOne(t.Context(), s, fmt.Sprintf("w%d", i), longTTL)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			leases[i] = append(leases[i], l)
		}
	})
	taken := map[string]string{} // chat id -> worker
	for i, err := range errs {
		if err != nil {
			t.Fatalf("acquirer %d: %v", i, err)
		}
		for _, l := range leases[i] {
			if w, dup := taken[l.ChatID]; dup {
				t.Fatalf("chat %s acquired by both %s and %s", l.ChatID, w, l.WorkerID)
			}
			taken[l.ChatID] = l.WorkerID
		}
	}
	if len(taken) != chats {
		t.Fatalf("%d chats acquired, want %d", len(taken), chats)
	}
	for id, w := range taken {
		if c := getChat(t, s, id); c.Status != chat.Running || c.WorkerID != w || c.LeaseGeneration != 1 {
			t.Fatalf("chat %s: %s by %q generation %d, want running by %s generation 1", id, c.Status, c.WorkerID, c.LeaseGeneration, w)
		}
	}
}

func testRenew(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addChat(t, s, chat.Chat{Status: chat.Pending})
	c, l := acquire(t, s, "w1", time.Minute)

	before := now()
	interrupt, err := s.RenewLease(t.Context(), l, longTTL)
	after := now()
	if err != nil || interrupt {
		t.Fatalf("RenewLease = %v, %v; want false, nil", interrupt, err)
	}
	got := getChat(t, s, c.ID)
	wantExpiry(t, "renewed lease", got, before, after, longTTL)
	if !got.LeaseExpiresAt.After(*c.LeaseExpiresAt) {
		t.Fatalf("renewal did not extend the lease: %v, then %v", c.LeaseExpiresAt, got.LeaseExpiresAt)
	}
	want := c
	want.LeaseExpiresAt = got.LeaseExpiresAt
	wantEqual(t, "chat after renewal", got, want)

	inTx(t, s, func(tx store.Tx) error { return tx.SetInterruptRequested(t.Context(), c.ID, true) })
	if interrupt, err := s.RenewLease(t.Context(), l, longTTL); err != nil || !interrupt {
		t.Fatalf("RenewLease after an interrupt request = %v, %v; want true, nil", interrupt, err)
	}
}

func testRenewLost(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addChat(t, s, chat.Chat{Status: chat.Pending})
	c, l := acquire(t, s, "w1", longTTL)
	other := addChat(t, s, chat.Chat{Status: chat.Running})

	stale := []store.Lease{
		{ChatID: l.ChatID, WorkerID: l.WorkerID, Generation: l.Generation - 1},
		{ChatID: l.ChatID, WorkerID: l.WorkerID, Generation: l.Generation + 1},
		{ChatID: l.ChatID, WorkerID: "w2", Generation: l.Generation},
		{ChatID: l.ChatID, WorkerID: "", Generation: l.Generation},
		{ChatID: "missing", WorkerID: l.WorkerID, Generation: l.Generation},
		{ChatID: other.ID, WorkerID: "", Generation: 0}, // running, held by no one
	}
	for _, bad := range stale {
		_, err := s.RenewLease(t.Context(), bad, longTTL)
		wantErr(t, fmt.Sprintf("RenewLease(%+v)", bad), err, store.ErrLeaseLost)
		wantErr(t, fmt.Sprintf("Fence(%+v)", bad), fence(t, s, bad), store.ErrLeaseLost)
	}
	wantEqual(t, "chat after stale renewals", getChat(t, s, c.ID), c)
	wantEqual(t, "unleased chat after stale renewals", getChat(t, s, other.ID), stored(other))

	// Once the chat leaves running, the lease that held it is gone too.
	mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Waiting})
	_, err := s.RenewLease(t.Context(), l, longTTL)
	wantErr(t, "RenewLease after running -> waiting", err, store.ErrLeaseLost)
	if got := getChat(t, s, c.ID); got.Status != chat.Waiting || got.LeaseExpiresAt != nil {
		t.Fatalf("a failed renewal changed the chat: %s, lease until %v", got.Status, got.LeaseExpiresAt)
	}
}

// testRecoverExpiredOnce: an expired lease is recovered once, though two
// recoverers run together, and a live one is not; the old lease then fences
// nothing, and the chat's next lease has a higher generation.
func testRecoverExpiredOnce(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	short := addChat(t, s, chat.Chat{ID: "short", Status: chat.Pending})
	clockPast(t, short.UpdatedAt)
	addChat(t, s, chat.Chat{ID: "long", Status: chat.Pending})
	running, old := acquire(t, s, "w1", time.Millisecond)
	long, longLease := acquire(t, s, "w2", longTTL)
	if running.ID != short.ID {
		t.Fatalf("acquired %s first, want %s", running.ID, short.ID)
	}

	recovered := map[string]int{}
	deadline := time.Now().Add(10 * time.Second)
	for getChat(t, s, short.ID).Status == chat.Running {
		if time.Now().After(deadline) {
			t.Fatalf("lease of %v still not recovered after 10s", running.LeaseExpiresAt)
		}
		ids := make([][]string, 2)
		errs := runTogether(2, func(i int) error {
			var err error
			ids[i], err = s.RecoverExpiredLeases(t.Context(), true)
			return err
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("recoverer %d: %v", i, err)
			}
			for _, id := range ids[i] {
				recovered[id]++
			}
		}
	}
	wantEqual(t, "recovered chats", recovered, map[string]int{short.ID: 1})

	got := getChat(t, s, short.ID)
	if got.Status != chat.Pending || got.WorkerID != "" || got.LeaseExpiresAt != nil || got.LeaseGeneration != old.Generation {
		t.Fatalf("recovered chat: %s, worker %q, lease until %v, generation %d; want pending, no worker nor expiry, generation %d",
			got.Status, got.WorkerID, got.LeaseExpiresAt, got.LeaseGeneration, old.Generation)
	}
	if got.UpdatedAt.Before(running.UpdatedAt) {
		t.Fatalf("recovery moved UpdatedAt back: %v -> %v", running.UpdatedAt, got.UpdatedAt)
	}
	wantEqual(t, "the live lease's chat", getChat(t, s, long.ID), long)
	if err := fence(t, s, longLease); err != nil {
		t.Fatalf("Fence of the live lease: %v", err)
	}

	wantErr(t, "Fence of the recovered lease", fence(t, s, old), store.ErrLeaseLost)
	_, err := s.RenewLease(t.Context(), old, longTTL)
	wantErr(t, "RenewLease of the recovered lease", err, store.ErrLeaseLost)

	// The same worker acquires it again: only the generation tells the
	// leases apart.
	_, again := acquire(t, s, old.WorkerID, longTTL)
	wantEqual(t, "new lease", again, store.Lease{ChatID: short.ID, WorkerID: old.WorkerID, Generation: old.Generation + 1})
	wantErr(t, "Fence of the old lease after re-acquisition", fence(t, s, old), store.ErrLeaseLost)
	_, err = s.RenewLease(t.Context(), old, longTTL)
	wantErr(t, "RenewLease of the old lease after re-acquisition", err, store.ErrLeaseLost)
	if err := fence(t, s, again); err != nil {
		t.Fatalf("Fence of the new lease: %v", err)
	}
}

// testLostLeaseWritesNothing: a worker's fenced write goes through while it
// holds the lease, and writes nothing once the lease is gone, however it
// went.
func testLostLeaseWritesNothing(t *testing.T, open opener) {
	lose := map[string]func(t *testing.T, s store.Store, l store.Lease){
		"TakenOver": func(t *testing.T, s store.Store, l store.Lease) {
			// Recovered (as if expired) and acquired by another worker.
			mustTransition(t, s, l.ChatID, store.Transition{From: chat.Running, To: chat.Pending})
			acquire(t, s, "w2", longTTL)
		},
		"LeftRunning": func(t *testing.T, s store.Store, l store.Lease) {
			mustTransition(t, s, l.ChatID, store.Transition{From: chat.Running, To: chat.Waiting})
		},
		"Deleted": func(t *testing.T, s store.Store, l store.Lease) {
			inTx(t, s, func(tx store.Tx) error { return tx.DeleteChat(t.Context(), l.ChatID) })
		},
	}
	for name, loseLease := range lose {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			addOwner(t, s, "alice")
			c := addChat(t, s, chat.Chat{Status: chat.Pending})
			appendMessage(t, s, textMessage(c.ID, "hello"))
			_, l := acquire(t, s, "w1", longTTL)
			if err := fencedAppend(t, s, l, "answer"); err != nil {
				t.Fatalf("fenced write under the live lease: %v", err)
			}
			history := listMessages(t, s, c.ID, 0, 0)
			if len(history) != 2 {
				t.Fatalf("%d messages after the fenced write, want 2", len(history))
			}

			loseLease(t, s, l)
			history = listMessages(t, s, c.ID, 0, 0)
			before, errBefore := s.GetChat(t.Context(), c.ID)
			err := fencedAppend(t, s, l, "too late")
			wantErr(t, "fenced write after losing the lease", err, store.ErrLeaseLost)
			_, _, err = fencedFinish(t, s, l, "too late", "and later")
			wantErr(t, "fenced final write after losing the lease", err, store.ErrLeaseLost)
			wantEqual(t, "history after the refused writes", listMessages(t, s, c.ID, 0, 0), history)
			after, errAfter := s.GetChat(t.Context(), c.ID)
			wantEqual(t, "chat after the refused write", after, before)
			if (errBefore == nil) != (errAfter == nil) {
				t.Fatalf("GetChat before the refused write: %v, after it: %v", errBefore, errAfter)
			}
		})
	}
}

// runningChat opens a store with one chat (a user message in its history)
// that worker w1 holds under a long lease.
func runningChat(t *testing.T, open opener) (store.Store, chat.Chat, store.Lease) {
	t.Helper()
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Pending})
	appendMessage(t, s, textMessage(c.ID, "hello"))
	c, l := acquire(t, s, "w1", longTTL)
	return s, c, l
}

// testFencedFinalWrite: a step's final write (Fence, messages under
// reserved ids, the change from running with their usage) stores the
// messages in id order, adds their usage once, and ends the lease.
func testFencedFinalWrite(t *testing.T, open opener) {
	s, c, l := runningChat(t, open)
	after, msgs, err := fencedFinish(t, s, l, "first", "second")
	if err != nil {
		t.Fatalf("final write under the live lease: %v", err)
	}
	if after.Status != chat.Waiting || after.WorkerID != "" || after.LeaseExpiresAt != nil {
		t.Fatalf("after the final write: %s, worker %q, lease until %v; want waiting with no lease", after.Status, after.WorkerID, after.LeaseExpiresAt)
	}
	wantEqual(t, "usage after the final write", after.Usage, chat.Usage{InputTokens: 20, OutputTokens: 3})
	wantEqual(t, "stored chat", getChat(t, s, c.ID), after)
	history := listMessages(t, s, c.ID, 0, 0)
	if len(history) != 3 {
		t.Fatalf("%d messages after the final write, want 3", len(history))
	}
	wantEqual(t, "messages of the final write", history[1:], msgs)
	// The lease ended with the write: the same write again is refused.
	_, _, err = fencedFinish(t, s, l, "again")
	wantErr(t, "a second final write under the ended lease", err, store.ErrLeaseLost)
}

// testFinalWriteSeesQueued: a run's final write that waits for the chat's
// row while a user's message is being queued (the queue's transaction holds
// the row) sees that message in the queue once its fence may go on, so it
// promotes it instead of leaving a message nobody will answer.
func testFinalWriteSeesQueued(t *testing.T, open opener) {
	s, c, l := runningChat(t, open)
	ids, err := s.ReserveMessageIDs(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	queued := queueWhileLocked(t, s, c.ID)
	var seen []chat.QueuedMessage
	err = txErr(t, s, func(tx store.Tx) error {
		if err := tx.Fence(t.Context(), l); err != nil {
			return err
		}
		m := chat.Message{ID: ids[0], ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("answer")}}
		if err := tx.InsertMessage(t.Context(), &m); err != nil {
			return err
		}
		var err error
		seen, err = tx.ListQueued(t.Context(), c.ID)
		return err
	})
	if err != nil {
		t.Fatalf("final write: %v", err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("queue a message: %v", err)
	}
	if len(seen) != 1 {
		t.Fatalf("the final write saw %d queued messages after its fence, want the one queued while it waited", len(seen))
	}
}

// testLeavingRunningEndsLease: a change from running to another status
// clears the worker and the lease expiry and keeps the generation; running
// to running keeps the lease.
func testLeavingRunningEndsLease(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	for _, to := range chat.Statuses {
		if !chat.CanTransition(chat.Running, to) {
			continue
		}
		addChat(t, s, chat.Chat{Status: chat.Pending})
		c, l := acquire(t, s, "w1", longTTL)
		got := mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: to})
		stillHeld := to == chat.Running
		if stillHeld {
			if got.WorkerID != l.WorkerID || !got.LeaseExpiresAt.Equal(*c.LeaseExpiresAt) {
				t.Fatalf("running -> running: worker %q, lease until %v; want the lease kept", got.WorkerID, got.LeaseExpiresAt)
			}
			mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Waiting})
		} else if got.WorkerID != "" || got.LeaseExpiresAt != nil {
			t.Fatalf("running -> %s: worker %q, lease until %v; want both cleared", to, got.WorkerID, got.LeaseExpiresAt)
		}
		if got.LeaseGeneration != l.Generation {
			t.Fatalf("running -> %s: generation %d, want %d kept", to, got.LeaseGeneration, l.Generation)
		}
		wantEqual(t, "stored worker after running -> "+string(to), getChat(t, s, c.ID).WorkerID, "")
		// The next acquisition must find only the next chat.
		inTx(t, s, func(tx store.Tx) error { return tx.DeleteChat(t.Context(), c.ID) })
	}
}

// addDeadlines stores chats with action deadlines relative to now, and
// returns the ids ExpiredActions must list, in order.
func addDeadlines(t *testing.T, s store.Store) []string {
	n := now()
	for _, c := range []chat.Chat{
		{ID: "b-due", Status: chat.RequiresAction, ActionDeadline: ptr(n.Add(-time.Hour))},
		{ID: "a-due", Status: chat.RequiresAction, ActionDeadline: ptr(n.Add(-time.Hour - time.Minute))},
		{ID: "z-first", Status: chat.RequiresAction, ActionDeadline: ptr(n.Add(-2 * time.Hour))},
		{ID: "later", Status: chat.RequiresAction, ActionDeadline: ptr(n.Add(time.Hour))},
		{ID: "not-waiting", Status: chat.Waiting, ActionDeadline: ptr(n.Add(-3 * time.Hour))},
		{ID: "not-running", Status: chat.Running, ActionDeadline: ptr(n.Add(-3 * time.Hour))},
	} {
		addChat(t, s, c)
	}
	return []string{"z-first", "a-due", "b-due"}
}

// expiredIDs lists the ids of ExpiredActions' answer, checking that each
// deadline is the chat's own.
func expiredIDs(t *testing.T, s store.Reader, es []store.Expired) []string {
	t.Helper()
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ChatID
		if c := getChat(t, s, e.ChatID); c.ActionDeadline == nil || !c.ActionDeadline.Equal(e.Deadline) {
			t.Errorf("expired %s with deadline %v; the chat's is %v", e.ChatID, e.Deadline, c.ActionDeadline)
		}
	}
	return ids
}

func testExpiredActions(t *testing.T, open opener) {
	s := open(t)
	es, err := s.ExpiredActions(t.Context(), 10)
	if err != nil || len(es) != 0 {
		t.Fatalf("ExpiredActions on an empty store = %v, %v", es, err)
	}
	addOwner(t, s, "alice")
	want := addDeadlines(t, s)
	es, err = s.ExpiredActions(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "expired actions", expiredIDs(t, s, es), want)

	// Leaving requires_action takes a chat off the list.
	mustTransition(t, s, "a-due", store.Transition{From: chat.RequiresAction, To: chat.Pending})
	es, err = s.ExpiredActions(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "expired actions after one left", expiredIDs(t, s, es), slices.DeleteFunc(want, func(id string) bool { return id == "a-due" }))
}

func testExpiredActionsLimit(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	want := addDeadlines(t, s)
	es, err := s.ExpiredActions(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "expired actions, limit 2", expiredIDs(t, s, es), want[:2])
	inTx(t, s, func(tx store.Tx) error {
		es, err := tx.ExpiredActions(t.Context(), 10)
		if err != nil {
			return err
		}
		wantEqual(t, "expired actions in a transaction", expiredIDs(t, tx, es), want)
		return nil
	})
}

// testAcquireSeveral: one call takes up to max chats, oldest first, each
// under its own lease.
func testAcquireSeveral(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	var want []string
	for i := range 5 {
		c := addChat(t, s, chat.Chat{ID: fmt.Sprintf("c%d", i), Status: chat.Pending})
		clockPast(t, c.UpdatedAt)
		want = append(want, c.ID)
	}
	var got []string
	for _, n := range []int{3, 3} {
		cs, ls, err := s.AcquireChats(t.Context(), store.Acquire{WorkerID: "w1", TTL: longTTL, Max: n})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != len(ls) {
			t.Fatalf("%d chats, %d leases", len(cs), len(ls))
		}
		for i, c := range cs {
			wantEqual(t, "lease of "+c.ID, ls[i], store.Lease{ChatID: c.ID, WorkerID: "w1", Generation: 1})
			if c.Status != chat.Running {
				t.Fatalf("chat %s is %s", c.ID, c.Status)
			}
			got = append(got, c.ID)
		}
	}
	wantEqual(t, "acquired in order", got, want)
	cs, _, err := s.AcquireChats(t.Context(), store.Acquire{WorkerID: "w1", TTL: longTTL, Max: 3})
	if err != nil || len(cs) != 0 {
		t.Fatalf("nothing left: %d chats, %v", len(cs), err)
	}
}

// testRecoveriesCounted: each recovery of an expired lease adds one to the
// chat's LeaseRecoveries (unless asked not to count it), acquiring keeps the count, and a worker that
// finishes a step or lets go of the chat (any change from running) sets it
// back to zero.
func testRecoveriesCounted(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Pending})
	// The third recovery is made after an outage of the database: not
	// counted.
	for i, want := range []int{1, 2, 2} {
		acquire(t, s, "w", time.Millisecond)
		deadline := time.Now().Add(10 * time.Second)
		for getChat(t, s, c.ID).Status == chat.Running {
			if time.Now().After(deadline) {
				t.Fatal("lease not recovered after 10s")
			}
			if _, err := s.RecoverExpiredLeases(t.Context(), i < 2); err != nil {
				t.Fatal(err)
			}
		}
		if got := getChat(t, s, c.ID).LeaseRecoveries; got != want {
			t.Fatalf("after recovery %d (counted: %v): LeaseRecoveries = %d, want %d", i+1, i < 2, got, want)
		}
	}
	running, _ := acquire(t, s, "w", longTTL)
	if running.LeaseRecoveries != 2 {
		t.Fatalf("acquired with LeaseRecoveries %d, want 2 (kept)", running.LeaseRecoveries)
	}
	if got := mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Running}); got.LeaseRecoveries != 0 || got.Status != chat.Running {
		t.Fatalf("a finished step (running -> running) left LeaseRecoveries %d, status %s; want 0, running", got.LeaseRecoveries, got.Status)
	}
	if got := mustTransition(t, s, c.ID, store.Transition{From: chat.Running, To: chat.Waiting}); got.LeaseRecoveries != 0 {
		t.Fatalf("let go with LeaseRecoveries %d, want 0", got.LeaseRecoveries)
	}
}

// testHasPending: HasPending tells whether a chat is pending, also one whose
// row another transaction holds (which AcquireChats passes over), without
// waiting for it.
func testHasPending(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	if pending, err := s.HasPending(t.Context()); err != nil || pending {
		t.Fatalf("HasPending on an empty store = %v, %v", pending, err)
	}
	c := addChat(t, s, chat.Chat{Status: chat.Waiting})
	if pending, err := s.HasPending(t.Context()); err != nil || pending {
		t.Fatalf("HasPending with a waiting chat = %v, %v", pending, err)
	}
	mustTransition(t, s, c.ID, store.Transition{From: chat.Waiting, To: chat.Pending})
	if pending, err := s.HasPending(t.Context()); err != nil || !pending {
		t.Fatalf("HasPending with a pending chat = %v, %v", pending, err)
	}
	acquire(t, s, "w", longTTL)
	if pending, err := s.HasPending(t.Context()); err != nil || pending {
		t.Fatalf("HasPending once the chat runs = %v, %v", pending, err)
	}
}

// queueWhileLocked starts a transaction that locks the chat's row, holds it
// while the caller's write starts and waits for it, then queues a message;
// it returns once the row is locked, with the channel of that
// transaction's outcome.
func queueWhileLocked(t *testing.T, s store.Store, chatID string) <-chan error {
	locked, queued := make(chan struct{}), make(chan error, 1)
	go func() {
		queued <- s.InTx(t.Context(), func(tx store.Tx) error {
			if _, err := tx.LockChat(t.Context(), chatID); err != nil {
				return err
			}
			close(locked)
			time.Sleep(300 * time.Millisecond) // the caller's write starts and waits
			q := chat.QueuedMessage{ChatID: chatID, Parts: []chat.Part{chat.TextPart("and also")}}
			return tx.InsertQueued(t.Context(), &q)
		})
	}()
	<-locked
	return queued
}
