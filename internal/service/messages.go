package service

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/chattx"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
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
// progress short: a pending or requires_action chat gets results for its
// open calls ("cancelled", or "outcome unknown" for a call a worker that
// died may have started: chattx.StopOpenCalls), then the message, and is
// pending; a running chat queues it and is asked to stop the step, so
// its worker promotes the message.
//
// A message is new work, queued ones too (a queued message starts a run
// once it is promoted): once one of the owner's spend or token budgets is
// reached, PostMessage refuses it with a *quota.ExceededError and writes
// nothing.
func (s *Service) PostMessage(ctx context.Context, owner, id string, content json.RawMessage, busy chat.BusyMode) (PostResult, error) {
	return s.Post(ctx, owner, id, Post{Content: content, Busy: busy})
}

// Post is a user message to post: the body of POST
// /api/v1/chats/{id}/messages.
type Post struct {
	Content json.RawMessage `json:"content"`
	Busy    chat.BusyMode   `json:"busy"`
	// ResponseFormat asks the final answer of the turn the message starts
	// as JSON valid against a schema ({"type": "text"}: free text); nil
	// leaves the chat's. It holds for that turn only, and travels with
	// the message while it is queued.
	ResponseFormat *chat.ResponseFormat `json:"response_format"`
}

// Post is PostMessage with everything a message may carry.
func (s *Service) Post(ctx context.Context, owner, id string, p Post) (PostResult, error) {
	busy := p.Busy
	if busy == "" {
		busy = chat.BusyQueue
	}
	if !busy.Valid() {
		return PostResult{}, &chat.ValidationError{Field: "busy",
			Message: fmt.Sprintf("%q must be one of %q, %q, %q", busy, chat.BusyQueue, chat.BusyInterrupt, chat.BusyReject)}
	}
	if p.ResponseFormat != nil {
		f := *p.ResponseFormat
		if err := f.Check("response_format"); err != nil {
			return PostResult{}, fmt.Errorf("post message to %s: %w", id, err)
		}
		p.ResponseFormat = &f
	}
	parts, err := s.checkPost(ctx, owner, p.Content)
	if err != nil {
		return PostResult{}, fmt.Errorf("post message to %s: %w", id, err)
	}
	var res PostResult
	err = s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		res, err = s.post(ctx, tx, n, owner, id, parts, p.ResponseFormat, busy)
		return err
	})
	if err != nil {
		return PostResult{}, fmt.Errorf("post message to %s: %w", id, err)
	}
	return res, nil
}

// checkPost checks what a new user message needs checked before the
// transaction that adds it: its content, its files (the owner's) and the
// owner's budget. It returns the message's parts.
func (s *Service) checkPost(ctx context.Context, owner string, content json.RawMessage) ([]chat.Part, error) {
	parts, err := chat.ParseContent(content, s.limits())
	if err != nil {
		return nil, err
	}
	if err := s.resolveFiles(ctx, owner, "content", parts); err != nil {
		return nil, err
	}
	if err := s.checkBudget(ctx, owner); err != nil {
		return nil, err
	}
	return parts, nil
}

// post is PostMessage's transaction: it adds or queues the message parts
// (checked by checkPost), asking for format (nil: the chat's), in the
// owner's chat id as busy says.
func (s *Service) post(ctx context.Context, tx store.Tx, n *events.Notice, owner, id string, parts []chat.Part, format *chat.ResponseFormat, busy chat.BusyMode) (PostResult, error) {
	var res PostResult
	c, err := lockOwned(ctx, tx, owner, id)
	if err != nil {
		return res, err
	}
	if err := s.checkInputs(c.Model, "content", parts); err != nil {
		return res, err
	}
	before := c.Status
	switch {
	case !c.Status.Busy():
		// Calls a failed run left open are answered first: nothing may
		// stand between a call and its result.
		if err := chattx.AnswerOpenCalls(ctx, tx, id, chat.ReasonUnknownOutcome, n); err != nil {
			return res, err
		}
		if err := s.titleFirst(ctx, tx, &c, parts, n); err != nil {
			return res, err
		}
		if _, err := chattx.PromoteQueued(ctx, tx, id, n); err != nil {
			return res, err
		}
		if res.Message, err = chattx.InsertUser(ctx, tx, id, parts, format, n); err != nil {
			return res, err
		}
		c, err = tx.TransitionChat(ctx, id, store.Transition{From: c.Status, To: chat.Pending})
		if err != nil {
			return res, fmt.Errorf("chat %s to pending: %w", id, err)
		}
	case busy == chat.BusyReject:
		return res, &BusyError{ChatID: id, Status: c.Status}
	case busy == chat.BusyQueue || c.Status == chat.Running:
		q := chat.QueuedMessage{ChatID: id, Parts: parts, ResponseFormat: format}
		if err := tx.InsertQueued(ctx, &q); err != nil {
			return res, fmt.Errorf("queue message: %w", err)
		}
		res.Queued = &q
		if busy == chat.BusyInterrupt {
			if err := requestInterrupt(ctx, tx, id, n); err != nil {
				return res, err
			}
		}
	default: // interrupt a pending or requires_action chat
		// No run holds the chat: a call a dead worker may have started
		// is answered "outcome unknown", the others cancelled.
		if err := chattx.StopOpenCalls(ctx, tx, c, s.needsDecision(c), chat.ReasonNewMessage, n); err != nil {
			return res, err
		}
		// Older queued messages go first: a new message never
		// overtakes them.
		if _, err := chattx.PromoteQueued(ctx, tx, id, n); err != nil {
			return res, err
		}
		if res.Message, err = chattx.InsertUser(ctx, tx, id, parts, format, n); err != nil {
			return res, err
		}
		if c.Status == chat.RequiresAction {
			c, err = tx.TransitionChat(ctx, id, store.Transition{From: c.Status, To: chat.Pending})
			if err != nil {
				return res, fmt.Errorf("chat %s to pending: %w", id, err)
			}
		}
	}
	n.StatusChanged(before, c)
	return res, nil
}

// titleFirst gives a chat that has neither a title nor any message yet (it
// was created without a first message) the fallback title of the message
// about to be its first, as creation with a message does; the run may then
// replace it with a generated one.
func (s *Service) titleFirst(ctx context.Context, tx store.Tx, c *chat.Chat, parts []chat.Part, n *events.Notice) error {
	if c.Title != "" {
		return nil
	}
	first, err := tx.ListMessages(ctx, c.ID, 0, 1)
	if err != nil {
		return fmt.Errorf("read history: %w", err)
	}
	title := chat.FallbackTitle(parts, s.limits().MaxTitleBytes)
	if len(first) > 0 || title == "" {
		return nil
	}
	next := *c
	next.Title = title
	if err := tx.UpdateChatMeta(ctx, &next); err != nil {
		return fmt.Errorf("title chat: %w", err)
	}
	n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindTitleChange, Chat: next})
	*c = next
	return nil
}

// needsDecision reports, for chat c, a server-side tool whose calls wait
// for a person's approval (chat.SortOpenCalls).
func (s *Service) needsDecision(c chat.Chat) func(name string) bool {
	return func(name string) bool {
		return s.tools != nil && s.tools.Has(name) && (s.tools.RequiresApproval(name) || c.Approve.Match(name))
	}
}
