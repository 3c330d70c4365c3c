package service

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/chattx"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// Interrupt stops the work in progress of the owner's chat: a running chat is
// asked to stop (its worker acts on the flag); a requires_action or pending
// chat gets results for its open calls ("cancelled", or "outcome unknown"
// for a call a worker that died may have started), its queued messages are
// promoted, and it waits (or stays pending, to answer them). A waiting or
// error chat is left as it is. It returns the chat.
func (s *Service) Interrupt(ctx context.Context, owner, id string) (chat.Chat, error) {
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = lockOwned(ctx, tx, owner, id); err != nil {
			return err
		}
		before := c.Status
		switch c.Status {
		case chat.Running:
			if err := requestInterrupt(ctx, tx, id, n); err != nil {
				return err
			}
			c.InterruptRequested = true
		case chat.RequiresAction, chat.Pending:
			// No run holds the chat: a call a dead worker may have started
			// is answered "outcome unknown", the others cancelled.
			if err := chattx.StopOpenCalls(ctx, tx, c, s.needsDecision(c), chat.ReasonInterrupted, n); err != nil {
				return err
			}
			// Messages queued behind the stopped work are answered next,
			// as when a run ends.
			queued, err := chattx.PromoteQueued(ctx, tx, id, n)
			if err != nil {
				return err
			}
			to := chat.Waiting
			if queued {
				to = chat.Pending
			}
			if to != c.Status {
				if c, err = tx.TransitionChat(ctx, id, store.Transition{From: c.Status, To: to}); err != nil {
					return fmt.Errorf("chat %s to %s: %w", id, to, err)
				}
			}
		}
		n.StatusChanged(before, c)
		return nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("interrupt chat %s: %w", id, err)
	}
	return c, nil
}

// Retry sets the owner's chat in error back to pending, so a worker continues
// from the persisted history. A chat in any other status is a StatusError.
func (s *Service) Retry(ctx context.Context, owner, id string) (chat.Chat, error) {
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = lockOwned(ctx, tx, owner, id); err != nil {
			return err
		}
		if c.Status != chat.Error {
			return &StatusError{ChatID: id, Status: c.Status, Reason: "only a chat in error can be retried"}
		}
		before := c.Status
		if c, err = tx.TransitionChat(ctx, id, store.Transition{From: c.Status, To: chat.Pending}); err != nil {
			return fmt.Errorf("chat %s to pending: %w", id, err)
		}
		n.StatusChanged(before, c)
		return nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("retry chat %s: %w", id, err)
	}
	return c, nil
}

// requestInterrupt flags a running chat for interruption and tells its
// worker at once through the chat's control topic; the flag is the durable
// fallback the worker sees on its next lease renewal.
func requestInterrupt(ctx context.Context, tx store.Tx, id string, n *events.Notice) error {
	if err := tx.SetInterruptRequested(ctx, id, true); err != nil {
		return fmt.Errorf("request interrupt: %w", err)
	}
	n.Control = append(n.Control, events.ControlFor{ChatID: id, Msg: events.Control{Kind: events.ControlInterrupt}})
	return nil
}
