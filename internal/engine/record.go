package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/chattx"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// stepOutcome is what a step produced, whatever happened: a whole answer, a
// partial one, tool results, calls left for someone, a failure. Nothing in
// it has been written; record alone turns it into rows.
type stepOutcome struct {
	// compaction is a summary of the history's older part (compact.go),
	// written before anything else of the outcome.
	compaction *chat.Message
	// done ends the run idle: a run that was asked only to compact.
	done bool
	// answer is the model's message; partial when the step was cut short
	// while it streamed.
	answer  *chat.Message
	partial bool
	// repair asks the model to answer again: the answer was not valid
	// against the turn's format (output.go). It is written after the
	// answer, and the run goes on.
	repair *chat.Message
	// tool is a tool message: the results of the calls that ran or were
	// refused, in call order, or the started marks of approved calls about
	// to run.
	tool *chat.Message
	// run are calls to make once this outcome is written: the answer's,
	// or calls a person approved (approved).
	run      []chat.ToolCall
	approved bool
	// stepDone says the outcome ends a step (the results of its calls):
	// recorded, it ends the count of the chat's lease recoveries in a row.
	// The answer written before its calls run does not: a tool that kills
	// its workers must still reach Config.MaxRecoveries.
	stepDone bool
	// awaiting are calls left for a client or a person (requires_action).
	awaiting []chat.ToolCall
	// failure ends the run in error; every call still open is then
	// answered open (why it has no result).
	failure *chat.ChatError
	open    string
}

// failed is the outcome of a run that cannot go on.
func failed(kind, message string) stepOutcome {
	return stepOutcome{failure: &chat.ChatError{Kind: kind, Message: message}, open: chat.ReasonUnknownOutcome}
}

// end is what recording an outcome does with the chat.
type end int

const (
	goOn           end = iota // the chat stays running: the run goes on
	endIdle                   // answered without tool calls: waiting, or pending to answer queued messages
	endAwait                  // calls wait for a client or a person: requires_action
	endInterrupted            // the user interrupted: open calls cancelled, queued messages promoted
	endHandBack               // shutdown: pending, so another worker goes on at once
	endFailed                 // error with last_error; open calls answered, queued messages promoted
	endLeaseLost              // the chat is not the run's any more: nothing is written
)

var endNames = [...]string{"go on", "idle", "await", "interrupted", "hand back", "failed", "lease lost"}

func (e end) String() string { return endNames[e] }

// statuses are the statuses an end may leave the chat in.
func (e end) statuses() []chat.Status {
	switch e {
	case endIdle, endInterrupted:
		return []chat.Status{chat.Waiting, chat.Pending}
	case endAwait:
		return []chat.Status{chat.RequiresAction}
	case endHandBack:
		return []chat.Status{chat.Pending}
	case endFailed:
		return []chat.Status{chat.Error}
	}
	return []chat.Status{chat.Running}
}

// endOf decides what recording o does, from o and from why the run's
// context ended, if it did.
func endOf(ctx context.Context, o stepOutcome) end {
	cause := context.Cause(ctx) // nil while ctx is live
	switch {
	case errors.Is(cause, errLeaseLost):
		return endLeaseLost
	case o.failure != nil:
		return endFailed
	case len(o.run) > 0:
		return goOn // its calls run next; cut short, they are answered "not executed"
	case o.repair != nil:
		return goOn // the model answers it next; cut short, the next run does
	case errors.Is(cause, errInterrupted):
		return endInterrupted
	case len(o.awaiting) > 0:
		return endAwait // a shutdown too: the client's calls wait as they would have
	case o.answer != nil && !o.partial, o.done:
		return endIdle
	case cause != nil:
		return endHandBack
	}
	return goOn
}

// record is the only place an outcome becomes rows: it writes the
// messages of o and the status change its end calls for in one fenced
// write, and reports whether the run goes on. Should that write fail for
// another reason than a lost lease, the run ends in error keeping what o
// holds (the answer, its usage, the results), and failing that, in error
// without them, their calls answered as calls that may have run: every
// path leaves a complete history and a chat that retry continues.
func (r *run) record(ctx context.Context, o stepOutcome) (more bool, err error) {
	end := endOf(ctx, o)
	if end == endLeaseLost {
		return false, store.ErrLeaseLost
	}
	err = r.recordAs(end, o)
	if err == nil || errors.Is(err, store.ErrLeaseLost) {
		return err == nil && end == goOn, err
	}
	r.log.Error("record the step", "end", end, "err", err)
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		// The database is down or hangs past the write's bound: another
		// write would wait as long. The run lets go; its lease expires and
		// the chat runs again once the database answers.
		return false, err
	}
	// The calls of an outcome not written yet have not run (o.run); the
	// others may have.
	open := chat.ReasonUnknownOutcome
	if len(o.run) > 0 {
		open = chat.ReasonNotExecuted + ": the run stopped before this call started"
	}
	if end != endFailed {
		keep := stepOutcome{answer: o.answer, tool: o.tool, failure: &chat.ChatError{Kind: "internal",
			Message: "could not record the step: " + err.Error() + "; retry to continue"}, open: open}
		if err = r.recordAs(endFailed, keep); err == nil || errors.Is(err, store.ErrLeaseLost) {
			return false, err
		}
		o.failure = keep.failure
		r.log.Error("record the failure with the step's messages; recording it without them", "err", err)
	}
	if o.answer != nil || o.tool != nil {
		err = r.recordAs(endFailed, stepOutcome{failure: o.failure, open: chat.ReasonUnknownOutcome})
	}
	if errors.Is(err, store.ErrLeaseLost) {
		return false, err
	}
	if err != nil {
		// Nothing more to try: the lease expires, and the chat runs again.
		r.log.Error("record the run's failure", "failure", o.failure.Message, "err", err)
	}
	return false, nil
}

// recordAs writes o with the given end.
func (r *run) recordAs(end end, o stepOutcome) error {
	var msgs []*chat.Message
	if o.compaction != nil {
		msgs = append(msgs, o.compaction)
	}
	if o.answer != nil && !(end == endHandBack && o.partial) {
		msgs = append(msgs, o.answer) // the next worker makes a cut model call again
	}
	if o.tool != nil {
		msgs = append(msgs, o.tool)
	}
	if o.repair != nil && end == goOn {
		msgs = append(msgs, o.repair)
	}
	if err := r.reserveIDs(msgs); err != nil {
		return err
	}
	var first int64
	if len(msgs) > 0 {
		first = msgs[0].ID
	} else if end == goOn {
		return nil // nothing to write
	}
	var after chat.Chat
	repairs := r.chat.OutputRepairs
	err := r.write(first, end.statuses(), func(ctx context.Context, tx store.Tx, n *events.Notice) error {
		if o.repair != nil && end == goOn {
			var err error
			if repairs, err = tx.AddOutputRepair(ctx, r.chat.ID); err != nil {
				return err
			}
		}
		var usage chat.Usage
		for _, m := range msgs {
			chat.MakeStorable(m)
			if err := tx.InsertMessage(ctx, m); err != nil {
				return err
			}
			n.Message(*m)
			if m.Usage != nil {
				usage = usage.Add(*m.Usage)
			}
		}
		t := store.Transition{From: chat.Running, To: chat.Running, AddUsage: usage}
		switch end {
		case goOn:
			if !o.stepDone || r.chat.LeaseRecoveries == 0 {
				// The chat's row changes only for the usage; the count of
				// recoveries stays until a step is done.
				if usage == (chat.Usage{}) {
					return nil
				}
				return tx.AddUsage(ctx, r.chat.ID, usage)
			}
		case endIdle, endInterrupted:
			if end == endInterrupted {
				if err := chattx.AnswerOpenCalls(ctx, tx, r.chat.ID, chat.ReasonInterrupted, n); err != nil {
					return err
				}
			}
			queued, err := chattx.PromoteQueued(ctx, tx, r.chat.ID, n)
			if err != nil {
				return err
			}
			t.To = chat.Waiting
			if queued {
				t.To = chat.Pending
			}
		case endAwait:
			t.To, t.ActionTimeout = chat.RequiresAction, r.chat.ToolResultTimeout
			if t.ActionTimeout <= 0 {
				t.ActionTimeout = r.e.cfg.ToolResultTimeout
			}
		case endHandBack:
			t.To, t.Compact = chat.Pending, r.chat.CompactRequested
		case endFailed:
			if err := chattx.AnswerOpenCalls(ctx, tx, r.chat.ID, o.open, n); err != nil {
				return err
			}
			// Messages queued during the run go into the history, as at
			// every end of a run: the chat stays in error, saying why,
			// and retry (or a new message) answers them.
			if _, err := chattx.PromoteQueued(ctx, tx, r.chat.ID, n); err != nil {
				return err
			}
			t.To, t.LastError = chat.Error, chat.StorableError(o.failure)
		}
		// A step that finished (running -> running) ends the count of
		// recoveries in a row, as leaving running does.
		c, err := tx.TransitionChat(ctx, r.chat.ID, t)
		if err != nil {
			return fmt.Errorf("chat to %s: %w", t.To, err)
		}
		if c.InterruptRequested && t.To != chat.Running {
			if err := tx.SetInterruptRequested(ctx, c.ID, false); err != nil {
				return err
			}
			c.InterruptRequested = false
		}
		if end == endAwait {
			// The store reckoned the deadline on the database's clock,
			// which every replica shares. The status change carries it.
			c.RequiredAction = &chat.RequiredAction{ToolCalls: o.awaiting, Deadline: *c.ActionDeadline}
		}
		if t.To != chat.Running {
			n.StatusChanged(chat.Running, c)
		}
		switch end {
		case endAwait:
			n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindActionRequired, Chat: c, ToolCalls: o.awaiting})
			n.ChatEvent(c.ID, events.ChatEvent{Kind: events.KindActionRequired, ToolCalls: o.awaiting, Deadline: c.ActionDeadline})
		case endFailed:
			n.ChatEvent(c.ID, events.ChatEvent{Kind: events.KindError, Error: t.LastError})
		}
		after = c
		return nil
	})
	if err != nil {
		return err
	}
	if after.ID != "" {
		r.chat = after
	}
	r.chat.OutputRepairs = repairs
	for _, m := range msgs {
		r.history = append(r.history, *m)
	}
	if o.compaction != nil {
		// A compaction asked for is done: a run handed back after it
		// does not ask the next one for another.
		r.chat.CompactRequested = false
		// What the model sees starts over from the summary: the run keeps
		// the history from it on, as a new run would read it.
		through := o.compaction.Parts[0].ThroughMessageID
		r.history = slices.DeleteFunc(r.history, func(m chat.Message) bool { return m.ID <= through })
		r.view = nil
	}
	return nil
}

// reserveIDs gives each message that has no id one above the history's
// last, in order, so a write names its messages before it makes them (and
// can find them after a commit of unknown outcome).
func (r *run) reserveIDs(msgs []*chat.Message) error {
	var last int64
	if len(r.history) > 0 {
		last = r.history[len(r.history)-1].ID
	}
	for _, m := range msgs {
		if m.ID == 0 {
			id, err := r.e.nextMessageID(context.Background(), last)
			if err != nil {
				return fmt.Errorf("reserve a message id: %w", err)
			}
			m.ID = id
		}
		last = m.ID
	}
	return nil
}
