package dbutil

import (
	"context"
	"errors"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// EndRunsOneByOne is Tx.EndRuns written with the transaction's other
// methods, one end after the other: for a store whose statements cost no
// round trip (SQLite). tx's Fence must check the lease at once.
func EndRunsOneByOne(ctx context.Context, tx store.Tx, ends []store.RunEnd) ([]store.RunEnded, error) {
	out := make([]store.RunEnded, len(ends))
	for i, e := range ends {
		if err := tx.Fence(ctx, e.Lease); errors.Is(err, store.ErrLeaseLost) {
			out[i].Err = err
			continue
		} else if err != nil {
			return nil, err
		}
		a := e.Answer
		if err := tx.InsertMessage(ctx, &a); err != nil {
			return nil, err
		}
		var u chat.Usage
		if a.Usage != nil {
			u = *a.Usage
		}
		c, err := tx.TransitionChat(ctx, e.Lease.ChatID, store.Transition{From: chat.Running, To: chat.Waiting, PendingIfQueued: true, AddUsage: u})
		if err != nil {
			return nil, err
		}
		if c.InterruptRequested {
			if err := tx.SetInterruptRequested(ctx, c.ID, false); err != nil {
				return nil, err
			}
			c.InterruptRequested = false
		}
		var promoted []chat.Message
		if c.Status == chat.Pending {
			queued, err := tx.ListQueued(ctx, c.ID)
			if err != nil {
				return nil, err
			}
			for _, q := range queued {
				m := chat.Message{ChatID: c.ID, Role: chat.RoleUser, Parts: q.Parts}
				if err := tx.InsertMessage(ctx, &m); err != nil {
					return nil, err
				}
				if err := tx.DeleteQueued(ctx, q.ID); err != nil {
					return nil, fmt.Errorf("delete queued %d: %w", q.ID, err)
				}
				promoted = append(promoted, m)
			}
		}
		out[i] = store.RunEnded{Chat: c, Answer: a, Promoted: promoted}
	}
	return out, nil
}
