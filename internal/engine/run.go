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
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// Why a run's context was cancelled (context.Cause).
var (
	errShutdown    = errors.New("the server is shutting down")
	errInterrupted = errors.New("interrupted by the user")
	errLeaseLost   = errors.New("lease lost")
)

// writeTimeout bounds each fenced write; writes use a context detached from
// the run's, so an interrupt or shutdown does not stop the write that
// records it.
const writeTimeout = 10 * time.Second

// run is one worker's hold on one chat, from acquire to let go.
type run struct {
	e     *Engine
	chat  chat.Chat
	lease store.Lease
	log   *slog.Logger
	steps *stepState // what the run streams of the step in progress, for snapshots
	// approved are calls a person approved that the run makes before it
	// calls the model (read with the history).
	approved []chat.ToolCall
	// first is the start of the history, read with the acquisition (up to
	// firstPage messages), for the first step; nil once used, or if not read.
	first []chat.Message
	// msgs is the chat's history, read once by the first step and then kept:
	// while the chat runs, nothing but its run adds messages to it, and the
	// run appends each message it wrote once the write committed.
	msgs []chat.Message
	// view is what the model sees of msgs[:viewed] (chat.ForModel), built
	// once and extended by each step, so a step does not redo the whole
	// history.
	view   []chat.Message
	viewed int
	// unsaved are messages of the step in progress that are not persisted
	// yet (tool results while their write is tried): a run that fails
	// writes them with its failure, so real results are not lost.
	unsaved []*chat.Message
}

// runChat runs the chat until it is let go. ctx ends on shutdown. Its move
// to running was announced by acquire, after it subscribed ctl to the chat's
// control topic (nil if that failed): the run takes the subscription over.
// first is the start of its history, if acquire read it.
func (e *Engine) runChat(ctx context.Context, c chat.Chat, lease store.Lease, ctl pubsub.Subscription, first []chat.Message) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &run{e: e, chat: c, lease: lease, log: e.log.With("chat", c.ID, "generation", lease.Generation), steps: newStepState(), first: first}

	go r.watch(ctx, cancel, ctl)

	// A panic (a provider SDK's, parley's own) ends this chat in error, not
	// the process: another replica would recover the chat and panic too.
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("run panicked", "panic", p, "stack", string(debug.Stack()))
			r.fail(&chat.ChatError{Kind: "internal", Message: fmt.Sprintf("internal error: %v", p)}, service.ReasonUnknownOutcome, r.unsaved...)
		}
	}()
	if err := r.loop(ctx); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			r.log.Warn("lease lost: this worker writes nothing more for the chat")
			return
		}
		r.log.Error("run failed", "err", err)
		r.fail(&chat.ChatError{Kind: "internal", Message: err.Error()}, service.ReasonUnknownOutcome, r.unsaved...)
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
// what fn recorded with the commit. store.ErrLeaseLost means the chat is no
// longer ours.
//
// A write the database could not take for a passing reason
// (store.ErrUnavailable: a lost connection, a restart) is tried again, on
// a fresh connection, until writeTimeout; a run gives up only after that.
func (r *run) write(fn func(ctx context.Context, tx store.Tx, n *events.Notice) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return untilAvailable(ctx, r.log, func(ctx context.Context) error {
		return events.Commit(ctx, r.e.st.InTx, r.e.ps, r.e.log, func(tx store.Tx, n *events.Notice) error {
			if err := tx.Fence(ctx, r.lease); err != nil {
				return err
			}
			return fn(ctx, tx, n)
		})
	})
}

// untilAvailable runs op, and again after a growing pause while it fails
// with store.ErrUnavailable (a lost connection, a restart), for up to
// writeTimeout or until ctx ends. What a run reads or writes goes through
// it, so a passing database failure delays a run instead of ending it in
// error, and a lasting one ends it.
func untilAvailable(ctx context.Context, log *slog.Logger, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	pause := 10 * time.Millisecond
	for {
		err := op(ctx)
		if !errors.Is(err, store.ErrUnavailable) {
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

// transition ends a fenced write with a status change from running and
// records it.
func (r *run) transition(ctx context.Context, tx store.Tx, n *events.Notice, t store.Transition) error {
	c, err := r.leave(ctx, tx, t)
	if err != nil {
		return err
	}
	r.left(n, c)
	return nil
}

// leave changes the chat's status from running, clearing an interrupt
// request the run no longer needs.
func (r *run) leave(ctx context.Context, tx store.Tx, t store.Transition) (chat.Chat, error) {
	t.From = chat.Running
	c, err := tx.TransitionChat(ctx, r.chat.ID, t)
	if err != nil {
		return chat.Chat{}, fmt.Errorf("chat to %s: %w", t.To, err)
	}
	if c.InterruptRequested {
		if err := tx.SetInterruptRequested(ctx, c.ID, false); err != nil {
			return chat.Chat{}, err
		}
		c.InterruptRequested = false
	}
	return c, nil
}

// left records the run's chat as it left running.
func (r *run) left(n *events.Notice, c chat.Chat) {
	n.StatusChanged(chat.Running, c)
	r.chat = c
}

// finishIdle ends a run whose last step answered without tool calls: the
// answer is written and queued messages are promoted into the history (then
// the chat is pending again), else the chat waits for the user. The end is
// a value (store.RunEnd): ends that arrive together are written in one go
// (batch.Batcher, Engine.commitEnds).
func (r *run) finishIdle(answer *chat.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return untilAvailable(ctx, r.log, func(context.Context) error {
		res, err := r.e.ends.Do(store.RunEnd{Lease: r.lease, Answer: *answer})
		if err != nil {
			return err
		}
		if res.Err != nil {
			return res.Err
		}
		r.chat = res.Chat
		return nil
	})
}

// maxEnds bounds the run ends written together.
const maxEnds = 64

// commitEnds writes run ends in one transaction (store.Tx.EndRuns: on
// PostgreSQL one statement) and announces what each did with its commit.
// Should the whole fail (a value the database refuses, say), each end is
// written alone, so one run's trouble is not the others'.
func (e *Engine) commitEnds(ends []store.RunEnd) ([]store.RunEnded, error) {
	res, err := e.commitEndsOnce(ends)
	if err == nil || len(ends) == 1 || errors.Is(err, store.ErrUnavailable) {
		return res, err
	}
	res = make([]store.RunEnded, len(ends))
	for i, end := range ends {
		one, err := e.commitEndsOnce([]store.RunEnd{end})
		if err != nil {
			res[i].Err = err
			continue
		}
		res[i] = one[0]
	}
	return res, nil
}

// commitEndsOnce is one transaction of commitEnds.
func (e *Engine) commitEndsOnce(ends []store.RunEnd) ([]store.RunEnded, error) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	var res []store.RunEnded
	err := events.Commit(ctx, e.st.InTx, e.ps, e.log, func(tx store.Tx, n *events.Notice) error {
		var err error
		if res, err = tx.EndRuns(ctx, ends); err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				continue
			}
			n.Message(r.Answer)
			for _, m := range r.Promoted {
				n.Message(m)
			}
			n.StatusChanged(chat.Running, r.Chat)
		}
		return nil
	})
	return res, err
}

// finishInterrupted ends a run the user interrupted: the open calls get
// "cancelled" results, queued messages are promoted, and the chat waits (or
// is pending, to answer them).
func (r *run) finishInterrupted(msgs ...*chat.Message) error {
	return r.write(func(ctx context.Context, tx store.Tx, n *events.Notice) error {
		if err := insert(ctx, tx, n, msgs...); err != nil {
			return err
		}
		if err := service.CancelOpenCalls(ctx, tx, r.chat.ID, service.ReasonInterrupted, n); err != nil {
			return err
		}
		queued, err := service.PromoteQueued(ctx, tx, r.chat.ID, n)
		if err != nil {
			return err
		}
		to := chat.Waiting
		if queued {
			to = chat.Pending
		}
		return r.transition(ctx, tx, n, store.Transition{To: to})
	})
}

// requireAction lets the chat wait for the client's results of calls,
// writing msgs (the step's server-side results) with the change.
func (r *run) requireAction(calls []chat.ToolCall, msgs ...*chat.Message) error {
	timeout := r.chat.ToolResultTimeout
	if timeout <= 0 {
		timeout = r.e.cfg.ToolResultTimeout
	}
	return r.write(func(ctx context.Context, tx store.Tx, n *events.Notice) error {
		if err := insert(ctx, tx, n, msgs...); err != nil {
			return err
		}
		// The store reckons the deadline on the database's clock, which
		// every replica shares.
		c, err := r.leave(ctx, tx, store.Transition{To: chat.RequiresAction, ActionTimeout: timeout})
		if err != nil {
			return err
		}
		deadline := *c.ActionDeadline
		c.RequiredAction = &chat.RequiredAction{ToolCalls: calls, Deadline: deadline}
		r.left(n, c)
		n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindActionRequired, Chat: c, ToolCalls: calls})
		n.ChatEvent(c.ID, events.ChatEvent{Kind: events.KindActionRequired, ToolCalls: calls, Deadline: &deadline})
		return nil
	})
}

// fail ends the run in error, writing msgs with it and answering every call
// still open with an error result that says open (why it has no result), in
// the same transaction: the history stays consistent, a message posted next
// follows complete results, and POST /retry continues from it. If msgs
// cannot be written, the failure is written without them (their calls then
// get open too).
func (r *run) fail(ce *chat.ChatError, open string, msgs ...*chat.Message) {
	end := func(msgs ...*chat.Message) error {
		return r.write(func(ctx context.Context, tx store.Tx, n *events.Notice) error {
			if err := insert(ctx, tx, n, msgs...); err != nil {
				return err
			}
			if err := service.CancelOpenCalls(ctx, tx, r.chat.ID, open, n); err != nil {
				return err
			}
			if err := r.transition(ctx, tx, n, store.Transition{To: chat.Error, LastError: ce}); err != nil {
				return err
			}
			n.ChatEvent(r.chat.ID, events.ChatEvent{Kind: events.KindError, Error: ce})
			return nil
		})
	}
	err := end(msgs...)
	if err != nil && !errors.Is(err, store.ErrLeaseLost) && slices.ContainsFunc(msgs, func(m *chat.Message) bool { return m != nil }) {
		r.log.Error("record run failure with the step's messages; recording it without them", "failure", ce.Message, "err", err)
		err = end()
	}
	if err != nil && !errors.Is(err, store.ErrLeaseLost) {
		r.log.Error("record run failure", "failure", ce.Message, "err", err)
	}
}

// handBack returns the chat to pending so another worker continues at once,
// writing msgs (results of tools that ran) with it.
func (r *run) handBack(msgs ...*chat.Message) error {
	err := r.write(func(ctx context.Context, tx store.Tx, n *events.Notice) error {
		if err := insert(ctx, tx, n, msgs...); err != nil {
			return err
		}
		return r.transition(ctx, tx, n, store.Transition{To: chat.Pending})
	})
	if errors.Is(err, store.ErrLeaseLost) {
		return err
	}
	if err != nil {
		r.log.Error("hand chat back", "err", err)
	}
	return nil
}

// commit runs fn in a transaction and announces the notice fn recorded with
// the commit (events.Commit).
func (e *Engine) commit(ctx context.Context, fn func(tx store.Tx, n *events.Notice) error) error {
	return events.Commit(ctx, e.st.InTx, e.ps, e.log, fn)
}

// announce publishes a notice built by fn.
func (e *Engine) announce(ctx context.Context, fn func(n *events.Notice)) {
	var n events.Notice
	fn(&n)
	n.Publish(ctx, e.ps, e.log)
}
