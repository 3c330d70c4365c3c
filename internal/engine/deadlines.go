package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// expireBatch bounds the deadlines handled per poll.
const expireBatch = 100

// expireActions resumes requires_action chats whose deadline passed: each
// call still waiting gets a synthetic error result, so the model can react
// (a call waiting for approval is denied), and the chat becomes pending. Any replica may do it; the row lock and the status
// check make it happen once.
func (e *Engine) expireActions(ctx context.Context) {
	expired, err := e.st.ExpiredActions(ctx, expireBatch)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("list expired deadlines", "err", err)
		}
		return
	}
	for _, x := range expired {
		if err := e.expireAction(ctx, x); err != nil && ctx.Err() == nil {
			e.log.Error("expire deadline", "chat", x.ChatID, "err", err)
		}
	}
}

// expireAction resumes one chat the database found past its deadline, if it
// still waits with that deadline (by the database's clock, it passed).
func (e *Engine) expireAction(ctx context.Context, x store.Expired) error {
	id := x.ChatID
	err := e.commit(ctx, func(tx store.Tx, n *events.Notice) error {
		c, err := tx.LockChat(ctx, id)
		if err != nil {
			return err
		}
		if c.Status != chat.RequiresAction || c.ActionDeadline == nil || !c.ActionDeadline.Equal(x.Deadline) {
			return nil // someone answered, or it moved on, first
		}
		tail, err := tx.LastTurn(ctx, id)
		if err != nil {
			return err
		}
		// Calls nobody answered get an error result: a client's "no result",
		// an approval's "denied". Calls a person approved stay open: the
		// run makes them when it resumes.
		if open := chat.PendingActions(tail, c.DynamicTools); len(open) > 0 {
			parts := chat.SyntheticResults(open, chat.ReasonDeadline)
			for i, call := range open {
				if call.Kind == chat.ActionApproval {
					parts[i].Output = chat.DeniedOutput(chat.ReasonNoDecision)
				}
			}
			m := chat.Message{ChatID: id, Role: chat.RoleTool, Parts: parts}
			if err := tx.InsertMessage(ctx, &m); err != nil {
				return err
			}
			n.Message(m)
		}
		after, err := tx.TransitionChat(ctx, id, store.Transition{From: chat.RequiresAction, To: chat.Pending})
		if err != nil {
			return err
		}
		n.StatusChanged(chat.RequiresAction, after)
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("expire deadline of %s: %w", id, err)
	}
	return nil
}
