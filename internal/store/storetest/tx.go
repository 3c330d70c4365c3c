package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var txTests = map[string]func(*testing.T, opener){
	"RollbackOnError":             testRollback,
	"UncommittedIsInvisible":      testUncommittedInvisible,
	"ConcurrentTransitionOnce":    testConcurrentTransition,
	"ConcurrentAppends":           testConcurrentAppends,
	"CancelledContext":            testCancelledContext,
	"CancelledInsideTx":           testCancelledInsideTx,
	"PanicRollsBack":              testPanicRollsBack,
	"FencedWritesIsolateFailures": testFencedWritesIsolateFailures,
	"AfterCommit":                 testAfterCommit,
	"AfterCommitPanicIsOwn":       testAfterCommitPanic,
	"Ping":                        testPing,
}

// concurrency is how many goroutines the concurrency tests start.
const concurrency = 8

func testRollback(t *testing.T, open opener) {
	s := open(t)
	err := txErr(t, s, func(tx store.Tx) error {
		if _, err := tx.CreateOwner(t.Context(), "alice"); err != nil {
			return err
		}
		c := chat.Chat{ID: "c", Owner: "alice", Model: "m", Status: chat.Waiting}
		if err := tx.InsertChat(t.Context(), &c); err != nil {
			return err
		}
		m := textMessage("c", "hi")
		if err := tx.InsertMessage(t.Context(), &m); err != nil {
			return err
		}
		return fmt.Errorf("step failed: %w", errBoom)
	})
	wantErr(t, "InTx", err, errBoom)
	_, err = s.GetChat(t.Context(), "c")
	wantErr(t, "GetChat after rollback", err, store.ErrNotFound)
	if n, err := s.CountOwners(t.Context()); err != nil || n != 0 {
		t.Fatalf("CountOwners after rollback = %d, %v; want 0", n, err)
	}
	if msgs := listMessages(t, s, "c", 0, 0); len(msgs) != 0 {
		t.Fatalf("messages after rollback: %+v", msgs)
	}
}

func testUncommittedInvisible(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	inTx(t, s, func(tx store.Tx) error {
		c := chat.Chat{ID: "c", Owner: "alice", Model: "m", Status: chat.Waiting}
		if err := tx.InsertChat(t.Context(), &c); err != nil {
			return err
		}
		if _, err := tx.GetChat(t.Context(), "c"); err != nil {
			return fmt.Errorf("the transaction does not see its own insert: %w", err)
		}
		_, err := s.GetChat(t.Context(), "c")
		wantErr(t, "GetChat outside the open transaction", err, store.ErrNotFound)
		return nil
	})
	getChat(t, s, "c")
}

// testConcurrentTransition: of many transactions that each lock a waiting
// chat and move it to pending, exactly one succeeds; the others see the
// change and get StatusConflictError.
func testConcurrentTransition(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{Status: chat.Waiting})
	errs := runTogether(concurrency, func(int) error {
		return s.InTx(t.Context(), func(tx store.Tx) error {
			locked, err := tx.LockChat(t.Context(), c.ID)
			if err != nil {
				return err
			}
			// Whoever got the lock after the winner must see pending here.
			if locked.Status != chat.Waiting {
				return &store.StatusConflictError{ChatID: c.ID, Status: locked.Status}
			}
			_, err = tx.TransitionChat(t.Context(), c.ID, store.Transition{From: chat.Waiting, To: chat.Pending})
			return err
		})
	})
	wins := 0
	for i, err := range errs {
		var sc *store.StatusConflictError
		switch {
		case err == nil:
			wins++
		case errors.As(err, &sc) && sc.Status == chat.Pending:
		default:
			t.Errorf("goroutine %d: %v; want success or StatusConflictError{pending}", i, err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d transactions won, want exactly 1", wins)
	}
	if st := getChat(t, s, c.ID).Status; st != chat.Pending {
		t.Fatalf("status %s, want pending", st)
	}
}

// testConcurrentAppends: goroutines append to one chat at once while a
// reader tails it with "after". Every message is stored once, each
// writer's ids increase, and the tail misses nothing: an id is never
// committed after a larger one of the same chat was visible.
func testConcurrentAppends(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	const perWriter = 10

	done := make(chan struct{})
	tailed := make(chan []int64, 1)
	tailErr := make(chan error, 1)
	go func() {
		var seen []int64
		var last int64
		for finished := false; ; {
			select {
			case <-done:
				finished = true // one last read after every writer is done
			default:
			}
			msgs, err := s.ListMessages(t.Context(), c.ID, last, store.MaxPageSize)
			if err != nil {
				tailErr <- err
				return
			}
			for _, m := range msgs {
				seen = append(seen, m.ID)
				last = m.ID
			}
			if finished && len(msgs) == 0 {
				tailed <- seen
				return
			}
		}
	}()

	mine := make([][]int64, concurrency)
	errs := runTogether(concurrency, func(w int) error {
		for i := range perWriter {
			m := textMessage(c.ID, fmt.Sprintf("w%d-%d", w, i))
			if i%2 == 0 {
				m.Usage = &chat.Usage{InputTokens: 1}
			}
			err := s.InTx(t.Context(), func(tx store.Tx) error {
				if err := tx.InsertMessage(t.Context(), &m); err != nil || m.Usage == nil {
					return err
				}
				return tx.AddUsage(t.Context(), c.ID, *m.Usage)
			})
			if err != nil {
				return err
			}
			mine[w] = append(mine[w], m.ID)
		}
		return nil
	})
	close(done)
	for w, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}

	all := listMessages(t, s, c.ID, 0, store.MaxPageSize)
	if len(all) != concurrency*perWriter {
		t.Fatalf("%d messages stored, want %d", len(all), concurrency*perWriter)
	}
	pos := map[int64]int{}
	for i, m := range all {
		if i > 0 && m.ID <= all[i-1].ID {
			t.Fatalf("listed ids not increasing at %d: %d after %d", i, m.ID, all[i-1].ID)
		}
		pos[m.ID] = i
	}
	for w, ids := range mine {
		for i, id := range ids {
			if _, ok := pos[id]; !ok {
				t.Fatalf("writer %d's message %d is missing", w, id)
			}
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("writer %d's ids do not increase: %v", w, ids)
			}
		}
	}
	if u := getChat(t, s, c.ID).Usage.InputTokens; u != concurrency*perWriter/2 {
		t.Fatalf("usage input tokens %d, want %d: concurrent usage updates were lost", u, concurrency*perWriter/2)
	}
	select {
	case err := <-tailErr:
		t.Fatalf("tail: %v", err)
	case seen := <-tailed:
		wantEqual(t, "ids seen by the tailing reader", seen, idsOf(all))
	}
}

// runTogether runs fn(0..n-1) on n goroutines released at once, and returns
// their errors.
func runTogether(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return errs
}

func testCancelledContext(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	c := addChat(t, s, chat.Chat{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	_, err := s.GetChat(ctx, c.ID)
	wantErr(t, "GetChat", err, context.Canceled)
	_, err = s.ListChats(ctx, store.ChatQuery{Owner: "alice"})
	wantErr(t, "ListChats", err, context.Canceled)
	_, err = s.ListMessages(ctx, c.ID, 0, 0)
	wantErr(t, "ListMessages", err, context.Canceled)
	err = s.InTx(ctx, func(tx store.Tx) error {
		_, err := tx.TransitionChat(ctx, c.ID, store.Transition{From: chat.Waiting, To: chat.Pending})
		return err
	})
	wantErr(t, "InTx", err, context.Canceled)
	// Nothing changed, and the store still works.
	if st := getChat(t, s, c.ID).Status; st != chat.Waiting {
		t.Fatalf("status %s after a cancelled transaction", st)
	}
	mustTransition(t, s, c.ID, store.Transition{From: chat.Waiting, To: chat.Pending})
}

// testCancelledInsideTx: a context cancelled while the transaction is open
// fails it, commits nothing, and leaves the store usable.
func testCancelledInsideTx(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := s.InTx(ctx, func(tx store.Tx) error {
		c := chat.Chat{ID: "c", Owner: "alice", Model: "m", Status: chat.Waiting}
		if err := tx.InsertChat(ctx, &c); err != nil {
			return err
		}
		cancel()
		return nil
	})
	wantErr(t, "InTx", err, context.Canceled)
	_, err = s.GetChat(t.Context(), "c")
	wantErr(t, "GetChat", err, store.ErrNotFound)
	for i := range 3 { // the store is not wedged: more transactions go through
		addChat(t, s, chat.Chat{ID: fmt.Sprintf("after-%d", i)})
	}
}

// testPanicRollsBack: a panic in fn reaches the caller, commits nothing and
// gives the connection back (on SQLite, the only writer connection).
func testPanicRollsBack(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	func() {
		defer func() {
			if p := recover(); p != errBoom {
				t.Fatalf("recovered %v, want the panic of fn", p)
			}
		}()
		s.InTx(t.Context(), func(tx store.Tx) error {
			c := chat.Chat{ID: "c", Owner: "alice", Model: "m", Status: chat.Waiting}
			if err := tx.InsertChat(t.Context(), &c); err != nil {
				return err
			}
			panic(errBoom)
		})
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.InTx(ctx, func(tx store.Tx) error { _, err := tx.CreateOwner(ctx, "bob"); return err }); err != nil {
		t.Fatalf("InTx after a panic: %v", err)
	}
	_, err := s.GetChat(t.Context(), "c")
	wantErr(t, "GetChat", err, store.ErrNotFound)
}

func testPing(t *testing.T, open opener) {
	s := open(t)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// testFencedWritesIsolateFailures: many workers' fenced writes at once,
// which a store may run in shared transactions. Each caller gets its own
// outcome: the writes that succeed all stand; one that returns an error,
// panics, or finds its lease lost leaves nothing behind and gets its own
// error (or panic) back.
func testFencedWritesIsolateFailures(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	const n = 60
	for range n {
		c := addChat(t, s, chat.Chat{Status: chat.Pending})
		appendMessage(t, s, textMessage(c.ID, "hello"))
	}
	chats, leases, err := s.AcquireChats(t.Context(), store.Acquire{WorkerID: "w1", TTL: longTTL, Max: n})
	if err != nil || len(chats) != n {
		t.Fatalf("acquire %d chats: %d, %v", n, len(chats), err)
	}
	const (
		fails = iota
		panics
		lost
		succeeds
	)
	outcome := func(i int) int {
		switch {
		case i%5 == 1:
			return fails
		case i%11 == 4:
			return panics
		case i%7 == 3:
			return lost
		}
		return succeeds
	}
	for i, l := range leases {
		if outcome(i) == lost {
			mustTransition(t, s, l.ChatID, store.Transition{From: chat.Running, To: chat.Waiting})
		}
	}
	// Plain transactions run beside them; each of them must commit once,
	// whatever the fenced writes beside it do.
	const plain = 20
	panicked := make([]any, n)
	errs := runTogether(n+plain, func(i int) error {
		if i >= n {
			return s.InTx(t.Context(), func(tx store.Tx) error {
				_, err := tx.CreateOwner(t.Context(), fmt.Sprint("plain", i))
				return err
			})
		}
		defer func() { panicked[i] = recover() }()
		l := leases[i]
		return s.InTx(t.Context(), func(tx store.Tx) error {
			if err := tx.Fence(t.Context(), l); err != nil {
				return err
			}
			m := chat.Message{ChatID: l.ChatID, Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart(fmt.Sprint("answer ", i))}}
			if err := tx.InsertMessage(t.Context(), &m); err != nil {
				return err
			}
			if _, err := tx.TransitionChat(t.Context(), l.ChatID, store.Transition{From: chat.Running, To: chat.Waiting}); err != nil {
				return err
			}
			switch outcome(i) {
			case fails:
				return errBoom
			case panics:
				panic(fmt.Sprint("panic ", i))
			}
			return nil
		})
	})
	for i, l := range leases {
		c, msgs := getChat(t, s, l.ChatID), listMessages(t, s, l.ChatID, 0, 0)
		var want error
		wantStatus, wantMsgs := chat.Running, 1
		switch outcome(i) {
		case fails:
			want = errBoom
		case panics:
			if panicked[i] != fmt.Sprint("panic ", i) {
				t.Errorf("call %d: panic %v reached its caller, want its own", i, panicked[i])
			}
		case lost:
			want, wantStatus = store.ErrLeaseLost, chat.Waiting
		case succeeds:
			wantStatus, wantMsgs = chat.Waiting, 2
		}
		if !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
			t.Errorf("call %d: %v, want %v", i, errs[i], want)
		}
		if c.Status != wantStatus || len(msgs) != wantMsgs {
			t.Errorf("call %d: chat %s with %d messages, want %s with %d", i, c.Status, len(msgs), wantStatus, wantMsgs)
		}
	}
	for i := n; i < n+plain; i++ {
		if errs[i] != nil {
			t.Errorf("plain transaction %d: %v", i, errs[i])
			continue
		}
		inTx(t, s, func(tx store.Tx) error {
			created, err := tx.CreateOwner(t.Context(), fmt.Sprint("plain", i))
			if err == nil && created {
				t.Errorf("plain transaction %d committed nothing", i)
			}
			return err
		})
	}
}

// testAfterCommit: AfterCommit's functions run once the transaction
// committed, before InTx returns, in the order they were added; never for a
// transaction that rolls back.
func testAfterCommit(t *testing.T, open opener) {
	s := open(t)
	var ran []string
	err := txErr(t, s, func(tx store.Tx) error {
		tx.AfterCommit(func() { ran = append(ran, "rolled back") })
		if _, err := tx.CreateOwner(t.Context(), "alice"); err != nil {
			return err
		}
		return errBoom
	})
	wantErr(t, "a failing transaction", err, errBoom)
	inTx(t, s, func(tx store.Tx) error {
		tx.AfterCommit(func() { ran = append(ran, "first") })
		tx.AfterCommit(func() { ran = append(ran, "second") })
		_, err := tx.CreateOwner(t.Context(), "alice")
		return err
	})
	wantEqual(t, "AfterCommit functions run", ran, []string{"first", "second"})
}

// testAfterCommitPanic: an AfterCommit function that panics reaches its own
// caller only (whose write committed); the other transactions running at
// the same time (in its group, where a store groups them) see their
// functions run and succeed.
func testAfterCommitPanic(t *testing.T, open opener) {
	s := open(t)
	const n = 20
	ran := make([]bool, n)
	panicked := make([]any, n)
	errs := runTogether(n, func(i int) error {
		defer func() { panicked[i] = recover() }()
		return s.InTx(t.Context(), func(tx store.Tx) error {
			if _, err := tx.CreateOwner(t.Context(), fmt.Sprint("owner", i)); err != nil {
				return err
			}
			tx.AfterCommit(func() {
				if i == 7 {
					panic("boom 7")
				}
				ran[i] = true
			})
			return nil
		})
	})
	for i := range n {
		switch {
		case i == 7 && panicked[i] != "boom 7":
			t.Errorf("call 7: panic %v, want its own", panicked[i])
		case i != 7 && (panicked[i] != nil || errs[i] != nil || !ran[i]):
			t.Errorf("call %d: panic %v, error %v, AfterCommit ran %v; want it to succeed", i, panicked[i], errs[i], ran[i])
		}
		inTx(t, s, func(tx store.Tx) error {
			created, err := tx.CreateOwner(t.Context(), fmt.Sprint("owner", i))
			if err == nil && created {
				t.Errorf("call %d committed nothing", i)
			}
			return err
		})
	}
}
