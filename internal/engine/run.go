package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/store"
)

// Why a run's context was cancelled (context.Cause).
var (
	errShutdown    = errors.New("the server is shutting down")
	errInterrupted = errors.New("interrupted by the user")
	errLeaseLost   = errors.New("lease lost")
)

// run is one worker's hold on one chat, from acquire to let go. It runs
// steps (step.go), each of which produces an outcome, and records each
// outcome in one fenced write (record.go): doing a step is kept apart from
// writing what came of it.
type run struct {
	e      *Engine
	cancel context.CancelCauseFunc // stops the run, with its cause
	// runs ends when the engine shuts down, not with the run: the context
	// of work the run leaves behind (a title).
	runs  context.Context
	chat  chat.Chat
	lease store.Lease
	log   *slog.Logger
	steps *stepState // what the run streams of the step in progress, for snapshots
	// first is the start of the history from the newest compaction on, read
	// with the acquisition (up to firstPage messages), for the first step;
	// nil once used, or if not read.
	first []chat.Message
	// history is the chat's messages from its newest compaction on (what
	// the model sees), read once when the run begins and then kept: while
	// the chat runs nothing but its run adds messages to it, and record
	// appends each message once its write committed (and drops what a
	// compaction it records summarised).
	history []chat.Message
	// view is what the model sees of history[:viewed] (chat.ForModel),
	// built once and extended by each step, so a step does not redo the
	// whole history.
	view   []chat.Message
	viewed int
	// callIDs are the ids of the chat's tool calls, once a step needed
	// them (uniqueCallIDs).
	callIDs map[string]bool
	// files holds the bytes of the stored files the run sent the model,
	// by id, read once (withFiles).
	files map[string][]byte
}

// runChat runs the chat until it is let go. ctx ends on shutdown. Its move
// to running was announced by acquire, after it subscribed ctl to the chat's
// control topic (nil if that failed): the run takes the subscription over.
// first is the start of its history, if acquire read it.
func (e *Engine) runChat(ctx context.Context, c chat.Chat, lease store.Lease, ctl pubsub.Subscription, first []chat.Message) {
	runs := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &run{e: e, cancel: cancel, runs: runs, chat: c, lease: lease, log: e.log.With("chat", c.ID, "generation", lease.Generation), steps: newStepState(), first: first}

	watched := make(chan struct{})
	go func() { defer close(watched); r.watch(ctx, cancel, ctl) }()
	defer func() { cancel(nil); <-watched }() // no renewal outlives the run

	// A panic (a provider SDK's, parley's own) ends this chat in error, not
	// the process: another replica would recover the chat and panic too.
	// What the step held unwritten is lost; its calls are answered as
	// calls that may have run.
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("run panicked", "panic", p, "stack", string(debug.Stack()))
			r.record(context.WithoutCancel(ctx), failed("internal", fmt.Sprintf("internal error: %v", p)))
		}
	}()
	if err := r.loop(ctx); err != nil {
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			r.log.Warn("lease lost: this worker writes nothing more for the chat")
			return
		case errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
			// Nothing more can be written now: the lease expires, and the
			// chat runs again once the database answers.
			r.log.Error("the database is unavailable; letting go of the chat until its lease expires", "err", err)
			return
		}
		// A read failed (a record that fails ends the run by itself and
		// returns no error): the run ends in error, and retry continues it.
		r.log.Error("run failed", "err", err)
		r.record(context.WithoutCancel(ctx), failed("internal", err.Error()))
	}
}

// watch renews the lease and listens to the chat's control topic on ctl
// until ctx ends, then closes ctl: a lost lease or an interrupt cancels the
// run with its cause, and a snapshot request is answered with the step so
// far (and makes the run's deltas cross replicas). A control subscription
// that is missing or ends (it lagged) is made anew, and the run is then
// watched, since requests may have been lost; the lease is renewed
// regardless.
func (r *run) watch(ctx context.Context, cancel context.CancelCauseFunc, ctl pubsub.Subscription) {
	// Jittered, so chats acquired together do not renew together.
	jitter := func() time.Duration {
		return r.e.cfg.Heartbeat*4/5 + rand.N(r.e.cfg.Heartbeat*2/5+1)
	}
	beat := time.NewTimer(jitter())
	defer beat.Stop()
	defer func() {
		if ctl != nil {
			ctl.Close()
		}
	}()
	for {
		if ctl == nil && ctx.Err() == nil {
			// Requests sent while there was no subscription are lost, a
			// snapshot request among them maybe: its stream, wherever it
			// is, gets the deltas from now on.
			r.steps.markWatched()
			var err error
			if ctl, err = r.e.ps.Subscribe(ctx, events.ControlTopic(r.lease.ChatID)); err != nil {
				r.log.Warn("subscribe to control topic; interrupts wait for the next lease renewal", "err", err)
				ctl = nil
			}
		}
		var msgs <-chan pubsub.Message
		if ctl != nil {
			msgs = ctl.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			beat.Reset(jitter())
			interrupt, err := r.e.st.RenewLease(ctx, r.lease, r.e.cfg.LeaseTTL)
			switch {
			case errors.Is(err, store.ErrLeaseLost):
				cancel(errLeaseLost)
				return
			case err != nil && ctx.Err() == nil:
				r.e.unavailable(err)
				r.log.Warn("renew lease", "err", err) // the next beat tries again before the lease expires
			case interrupt:
				cancel(errInterrupted)
			}
		case m, ok := <-msgs:
			if !ok {
				ctl.Close()
				ctl = nil
				continue
			}
			if m.Missed {
				// A snapshot request may be among the lost: its stream,
				// wherever it is, gets the deltas from now on.
				r.steps.markWatched()
				continue
			}
			var c events.Control
			if json.Unmarshal(m.Payload, &c) != nil {
				continue
			}
			switch c.Kind {
			case events.ControlInterrupt:
				cancel(errInterrupted)
			case events.ControlSnapshot:
				r.steps.answer(ctx, r.e, r.lease.ChatID, c.Nonce)
			}
		}
	}
}

// write runs fn in a transaction fenced by the run's lease and announces
// what fn recorded with the commit. store.ErrLeaseLost means the chat is
// no longer the run's. first is the id (reserved) of the first message fn
// inserts, or 0 when it inserts none of its own: then it moves the chat
// out of running, to one of to.
//
// A write the database could not take for a passing reason
// (store.ErrUnavailable: a lost connection, a restart) is tried again, on
// a fresh connection, until Config.WriteTimeout. Such a failure may have struck
// after the commit went out, leaving its outcome unknown: before trying
// again, the run asks the database whether the write is there
// (committed), so a write is neither made twice nor mistaken for a lost
// lease.
func (r *run) write(first int64, to []chat.Status, fn func(ctx context.Context, tx store.Tx, n *events.Notice) error) error {
	// Not the run's context: an interrupt or a shutdown must not stop the
	// write that records it.
	ctx := context.Background()
	var (
		notice   *events.Notice // what the last attempt recorded
		doubtful bool           // the last attempt ran fn, then failed: it may have committed
	)
	return r.e.untilAvailable(ctx, r.log, func(ctx context.Context) error {
		if doubtful {
			done, err := r.committed(ctx, first, to)
			if err != nil {
				return err
			}
			if done {
				r.log.Info("a write whose commit was not confirmed is in the database: done")
				notice.Publish(ctx, r.e.ps, r.e.log)
				return nil
			}
		}
		ran := false
		err := events.Commit(ctx, r.e.st.InTx, r.e.ps, r.e.log, func(tx store.Tx, n *events.Notice) error {
			if err := tx.Fence(ctx, r.lease); err != nil {
				return err
			}
			if err := fn(ctx, tx, n); err != nil {
				return err
			}
			notice, ran = n, true
			return nil
		})
		// Only an attempt whose fn ran to its end can have committed.
		doubtful = ran && errors.Is(err, store.ErrUnavailable)
		return err
	})
}

// committed reports whether a write of the run (see write) is in the
// database: its first message is, or, for a write that inserts none of
// its own, the chat left running under the run's lease for one of to. A
// recovery, the only other way out of running that keeps the lease's
// generation, makes the chat pending: for the writes that do so too, the
// two cannot be told apart, and both leave the chat for the next run.
func (r *run) committed(ctx context.Context, first int64, to []chat.Status) (bool, error) {
	if first != 0 {
		msgs, err := r.e.st.ListMessages(ctx, r.chat.ID, first-1, 1)
		return err == nil && len(msgs) == 1 && msgs[0].ID == first, err
	}
	c, err := r.e.st.GetChat(ctx, r.chat.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // deleted: the write's fence says so
	}
	return err == nil && slices.Contains(to, c.Status) && c.LeaseGeneration == r.lease.Generation, err
}

// untilAvailable runs op, and again after a growing pause while it fails
// with store.ErrUnavailable (a lost connection, a restart), for up to
// Config.WriteTimeout (every attempt included) or until ctx ends. What a run reads or
// writes goes through it, so a passing database failure delays a run
// instead of ending it in error, and a lasting one, or a database that
// hangs, ends it within timeout.
func (e *Engine) untilAvailable(ctx context.Context, log *slog.Logger, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.WriteTimeout)
	defer cancel()
	pause := 10 * time.Millisecond
	for {
		err := op(ctx)
		if !e.unavailable(err) {
			return err
		}
		log.Warn("database unavailable; trying again", "err", err, "pause", pause)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// unavailable reports whether err says the database was out of reach, and
// notes when it was (outage).
func (e *Engine) unavailable(err error) bool {
	if !errors.Is(err, store.ErrUnavailable) {
		return false
	}
	e.lastOutage.Store(time.Now().UnixNano())
	return true
}

// outage reports whether this engine found the database out of reach
// recently enough that a lease expiring now may be the outage's doing (no
// worker could renew) rather than a worker's death: such a recovery is not
// counted against the chat (Config.MaxRecoveries).
func (e *Engine) outage() bool {
	last := e.lastOutage.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < 2*e.cfg.LeaseTTL
}

// announce publishes a notice built by fn.
func (e *Engine) announce(ctx context.Context, fn func(n *events.Notice)) {
	var n events.Notice
	fn(&n)
	n.Publish(ctx, e.ps, e.log)
}

// commit runs fn in a transaction and announces the notice fn recorded with
// the commit (events.Commit).
func (e *Engine) commit(ctx context.Context, fn func(tx store.Tx, n *events.Notice) error) error {
	return events.Commit(ctx, e.st.InTx, e.ps, e.log, fn)
}
