package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/engine"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
)

// owner owns every chat of a bench.
const owner = "bench"

// loopResult is what one loop measurement found.
type loopResult struct {
	chats, steps int
	elapsed      time.Duration
	// Goroutines and heap bytes held once every chat is idle again, over the
	// idle engine's before the chats existed (after a GC).
	goroutines int
	heap       int64
}

func (r loopResult) stepsPerSec() float64 { return float64(r.steps) / r.elapsed.Seconds() }

// measureLoop measures the engine's steps per second with the instant
// model. The engine starts idle on the replica; chats chats, each with one
// user message, are inserted as pending without waking it; then one wake-up
// starts the clock, which stops when the last chat's run commits its move
// to waiting. Each run makes steps model calls. The goroutines and heap
// still held then, over the idle engine's, are the idle chats' cost.
func measureLoop(ctx context.Context, r *replica, chats, steps, conc int, log *slog.Logger) (loopResult, error) {
	res := loopResult{chats: chats, steps: chats * steps}
	if err := createOwner(ctx, r.st); err != nil {
		return res, err
	}
	disp, err := noopTools()
	if err != nil {
		return res, err
	}
	ws := newWatchStore(r.st, int64(chats))
	// PollInterval: the poll is a fallback for lost wake-ups and would start
	// the runs while the chats are still being inserted; here the bench
	// wakes the engine itself, once.
	cfg := engine.Config{Concurrency: conc, PollInterval: time.Hour}
	eng := engine.New(cfg, ws, r.ps, models{instant{steps: steps}}, disp, log)
	stop := runEngine(eng)
	defer stop()

	// The engine's first AcquireChats (it finds nothing) comes after it
	// subscribed to wake-ups, so the wake-up below cannot be missed.
	if err := waitFor(ctx, 10*time.Second, func() bool { return ws.acquires.Load() > 0 }); err != nil {
		return res, fmt.Errorf("engine did not start: %w", err)
	}
	g0, h0 := settle(0, 0)

	ids, err := insertPending(ctx, r.st, chats)
	if err != nil {
		return res, err
	}
	start := time.Now()
	n := events.Notice{Wake: true}
	n.Publish(ctx, r.ps, log)
	timeout := 5*time.Minute + time.Duration(res.steps)*10*time.Millisecond
	select {
	case <-ws.done:
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(timeout):
		return res, fmt.Errorf("only %d of %d chats became waiting within %s", ws.waiting.Load(), chats, timeout)
	}
	res.elapsed = ws.doneAt.Sub(start)
	if err := checkRuns(ctx, r.st, ids, steps); err != nil {
		return res, err
	}
	g1, h1 := settle(g0, 3*time.Second)
	res.goroutines, res.heap = g1-g0, h1-h0
	return res, nil
}

// settleWindow is how long settle looks for the lowest goroutine count.
const settleWindow = 300 * time.Millisecond

// settle collects garbage and returns the goroutine count and live heap.
// Given a positive wait, it first waits up to that long for the goroutine
// count to come down to want: goroutines of runs that just ended exit an
// instant after their last commit.
func settle(want int, wait time.Duration) (goroutines int, heap int64) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && runtime.NumGoroutine() > want {
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	runtime.GC() // the second cycle frees what finalizers of the first released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// A goroutine that comes and goes (the one a SQLite checkpoint's
	// statement runs while it lasts, say) is not held: the lowest count over
	// a short window is the one that counts, for the baseline (want 0) as for
	// the count after the runs.
	n := runtime.NumGoroutine()
	for end := time.Now().Add(settleWindow); n > want && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
		n = min(n, runtime.NumGoroutine())
	}
	return n, int64(ms.HeapAlloc)
}

// runEngine runs eng until the returned function is called; that function
// waits for Run to return (running chats are handed back).
func runEngine(eng *engine.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = eng.Run(ctx)
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// createOwner makes the bench's owner, if it does not exist.
func createOwner(ctx context.Context, st store.Store) error {
	err := st.InTx(ctx, func(tx store.Tx) error {
		_, err := tx.CreateOwner(ctx, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("create owner: %w", err)
	}
	return nil
}

// insertPending inserts n pending chats, each with one user message, in
// transactions of up to 200 chats, without publishing anything.
func insertPending(ctx context.Context, st store.Store, n int) ([]string, error) {
	ids := make([]string, 0, n)
	for len(ids) < n {
		batch := min(200, n-len(ids))
		var made []string
		err := st.InTx(ctx, func(tx store.Tx) error {
			made = made[:0]
			for range batch {
				id, err := uuid.NewV7()
				if err != nil {
					return err
				}
				c := chat.Chat{ID: id.String(), Owner: owner, Title: "bench", Model: modelName, Status: chat.Pending,
					DynamicTools: []chat.DynamicTool{}, Labels: map[string]string{}}
				if err := tx.InsertChat(ctx, &c); err != nil {
					return err
				}
				m := chat.Message{ChatID: c.ID, Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("hello")}}
				if err := tx.InsertMessage(ctx, &m); err != nil {
					return err
				}
				made = append(made, c.ID)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("insert pending chats: %w", err)
		}
		ids = append(ids, made...)
	}
	return ids, nil
}

// checkRuns checks that the first and the last chat ran to the end: waiting,
// with the user message and, per step, an assistant message (and a tool
// message for each tool step).
func checkRuns(ctx context.Context, st store.Store, ids []string, steps int) error {
	for _, id := range []string{ids[0], ids[len(ids)-1]} {
		c, err := st.GetChat(ctx, id)
		if err != nil {
			return fmt.Errorf("check run: %w", err)
		}
		msgs, err := st.ListMessages(ctx, id, 0, store.MaxPageSize)
		if err != nil {
			return fmt.Errorf("check run: %w", err)
		}
		if want := 1 + steps + (steps - 1); c.Status != chat.Waiting || len(msgs) != want {
			return fmt.Errorf("check run: chat %s is %s with %d messages (last_error %v), want waiting with %d", id, c.Status, len(msgs), c.LastError, want)
		}
	}
	return nil
}

// waitFor polls cond every millisecond until it holds, ctx ends or d passes.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// watchStore passes everything to the engine's store and watches two
// things: AcquireChats calls, and committed moves to waiting. When target
// chats have become waiting it records the time and closes done. It costs
// an atomic add per transaction.
type watchStore struct {
	store.Store
	target   int64
	acquires atomic.Int64
	waiting  atomic.Int64
	doneAt   time.Time
	done     chan struct{}
	once     sync.Once
}

func newWatchStore(st store.Store, target int64) *watchStore {
	return &watchStore{Store: st, target: target, done: make(chan struct{})}
}

func (s *watchStore) AcquireChats(ctx context.Context, a store.Acquire) ([]chat.Chat, []store.Lease, error) {
	cs, ls, err := s.Store.AcquireChats(ctx, a)
	s.acquires.Add(1)
	return cs, ls, err
}

func (s *watchStore) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.watch(ctx, s.Store.InTx, fn)
}

// watch runs fn with inTx, counting its moves to waiting once it committed.
func (s *watchStore) watch(ctx context.Context, inTx func(context.Context, func(store.Tx) error) error, fn func(tx store.Tx) error) error {
	var n int64
	err := inTx(ctx, func(tx store.Tx) error {
		n = 0
		ct := countTx{Tx: tx, waiting: &n}
		if ob, ok := tx.(pubsub.Outbox); ok {
			return fn(outboxTx{ct, ob}) // notifications still go with the commit
		}
		return fn(ct)
	})
	if err == nil && n > 0 && s.waiting.Add(n) >= s.target {
		s.once.Do(func() { s.doneAt = time.Now(); close(s.done) })
	}
	return err
}

// countTx counts the transaction's moves to waiting.
type countTx struct {
	store.Tx
	waiting *int64
}

// outboxTx is a countTx over a transaction that is a pubsub.Outbox.
type outboxTx struct {
	countTx
	pubsub.Outbox
}

func (t countTx) TransitionChat(ctx context.Context, id string, tr store.Transition) (chat.Chat, error) {
	c, err := t.Tx.TransitionChat(ctx, id, tr)
	if err == nil && tr.To == chat.Waiting {
		*t.waiting++
	}
	return c, err
}
