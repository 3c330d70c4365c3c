package service

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// Reasons written into the synthetic results of tool calls that a user cut
// short.
const (
	ReasonNewMessage  = "cancelled: the user sent a new message"
	ReasonInterrupted = "cancelled: interrupted"
)

// PostResult is where a posted message went: into the history (Message) or
// into the chat's queue (Queued). Exactly one is set.
type PostResult struct {
	Message *chat.Message       `json:"message,omitempty"`
	Queued  *chat.QueuedMessage `json:"queued,omitempty"`
}

// PostMessage adds a user message to the owner's chat. A waiting or error
// chat gets it in its history and becomes pending. A busy chat (pending,
// running, requires_action) follows busy: BusyQueue ("" too) queues it,
// BusyReject refuses it with a BusyError, and BusyInterrupt cuts the work in
// progress short: a pending chat takes the message at once; a requires_action
// chat gets "cancelled" results for its open calls, then the message, and
// becomes pending; a running chat queues it and is asked to stop the step, so
// its worker promotes the message.
func (s *Service) PostMessage(ctx context.Context, owner, id string, content json.RawMessage, busy chat.BusyMode) (PostResult, error) {
	if busy == "" {
		busy = chat.BusyQueue
	}
	if !busy.Valid() {
		return PostResult{}, &chat.ValidationError{Field: "busy",
			Message: fmt.Sprintf("%q must be one of %q, %q, %q", busy, chat.BusyQueue, chat.BusyInterrupt, chat.BusyReject)}
	}
	parts, err := chat.ParseContent(content, s.limits())
	if err != nil {
		return PostResult{}, err
	}
	var (
		res PostResult
		n   notice
	)
	err = s.st.InTx(ctx, func(tx store.Tx) error {
		res, n = PostResult{}, notice{}
		c, err := lockOwned(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		before := c.Status
		switch {
		case !c.Status.Busy():
			if err := promoteQueued(ctx, tx, id); err != nil {
				return err
			}
			if res.Message, err = insertUser(ctx, tx, id, parts); err != nil {
				return err
			}
			c, err = tx.TransitionChat(ctx, id, store.Transition{From: c.Status, To: chat.Pending})
			if err != nil {
				return fmt.Errorf("chat %s to pending: %w", id, err)
			}
		case busy == chat.BusyReject:
			return &BusyError{ChatID: id, Status: c.Status}
		case busy == chat.BusyQueue || c.Status == chat.Running:
			q := chat.QueuedMessage{ChatID: id, Parts: parts}
			if err := tx.InsertQueued(ctx, &q); err != nil {
				return fmt.Errorf("queue message: %w", err)
			}
			res.Queued = &q
			if busy == chat.BusyInterrupt {
				if err := tx.SetInterruptRequested(ctx, id, true); err != nil {
					return fmt.Errorf("request interrupt: %w", err)
				}
			}
		default: // interrupt a pending or requires_action chat
			if err := cancelOpenCalls(ctx, tx, id, ReasonNewMessage); err != nil {
				return err
			}
			if res.Message, err = insertUser(ctx, tx, id, parts); err != nil {
				return err
			}
			if c.Status == chat.RequiresAction {
				c, err = tx.TransitionChat(ctx, id, store.Transition{From: c.Status, To: chat.Pending})
				if err != nil {
					return fmt.Errorf("chat %s to pending: %w", id, err)
				}
			}
		}
		n.statusChanged(before, c)
		return nil
	})
	if err != nil {
		return PostResult{}, fmt.Errorf("post message to %s: %w", id, err)
	}
	s.announce(ctx, n)
	return res, nil
}

// insertUser appends a user message to the chat's history.
func insertUser(ctx context.Context, tx store.Tx, chatID string, parts []chat.Part) (*chat.Message, error) {
	m := chat.Message{ChatID: chatID, Role: chat.RoleUser, Parts: parts}
	if err := tx.InsertMessage(ctx, &m); err != nil {
		return nil, fmt.Errorf("insert message: %w", err)
	}
	return &m, nil
}

// promoteQueued moves messages left in an idle chat's queue into its history,
// in arrival order, so a new message never overtakes an older one.
func promoteQueued(ctx context.Context, tx store.Tx, chatID string) error {
	queued, err := tx.ListQueued(ctx, chatID)
	if err != nil {
		return fmt.Errorf("list queued: %w", err)
	}
	for _, q := range queued {
		if _, err := insertUser(ctx, tx, chatID, q.Parts); err != nil {
			return err
		}
		if err := tx.DeleteQueued(ctx, q.ID); err != nil {
			return fmt.Errorf("delete queued %d: %w", q.ID, err)
		}
	}
	return nil
}

// cancelOpenCalls answers every tool call of the chat's last assistant
// message that has no result yet with a synthetic error result, in one tool
// message, so no call is left dangling.
func cancelOpenCalls(ctx context.Context, tx store.Tx, chatID, reason string) error {
	tail, err := historyTail(ctx, tx, chatID)
	if err != nil {
		return err
	}
	calls := chat.UnresolvedCalls(tail)
	if len(calls) == 0 {
		return nil
	}
	m := chat.Message{ChatID: chatID, Role: chat.RoleTool, Parts: chat.SyntheticResults(calls, reason)}
	if err := tx.InsertMessage(ctx, &m); err != nil {
		return fmt.Errorf("insert cancelled results: %w", err)
	}
	return nil
}

// historyTail returns a chat's messages from its last assistant message on
// (all of them when there is none), reading the history page by page so only
// the tail is kept in memory.
func historyTail(ctx context.Context, r store.Reader, chatID string) ([]chat.Message, error) {
	var tail []chat.Message
	var after int64
	for {
		page, err := r.ListMessages(ctx, chatID, after, store.MaxPageSize)
		if err != nil {
			return nil, fmt.Errorf("read history of %s: %w", chatID, err)
		}
		for _, m := range page {
			if m.Role == chat.RoleAssistant {
				tail = tail[:0]
			}
			tail = append(tail, m)
		}
		if len(page) < store.MaxPageSize {
			return tail, nil
		}
		after = page[len(page)-1].ID
	}
}
