// Package service holds the operations on chats that clients ask for: create,
// read, patch, delete, post a message, interrupt, retry. Every change to a
// chat goes through here, so the status transitions a client can cause, and
// the events that announce them, live in one place.
//
// Each write is one store transaction that locks the chat, checks, then
// writes. After commit the owner's feed is told, and workers are woken when
// a chat became pending. Notifications are hints: a failure to publish one is
// logged, never returned.
package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

// Service performs chat operations on behalf of owners. It is safe for
// concurrent use.
type Service struct {
	st    store.Store
	ps    pubsub.PubSub
	cfg   *config.Config
	log   *slog.Logger
	tools ServerTools // nil: no server-side tools
	// budget refuses new work of an owner whose spend or token budget is
	// reached, and caps its chats (max_chats).
	budget *quota.Budget
	files  store.Files // where uploaded files are kept: the store unless WithFiles
}

// Option configures a Service.
type Option func(*Service)

// ServerTools is what the Service needs to know of the server-side tools
// (*tools.Registry), as of now.
type ServerTools interface {
	// Has reports a server-side tool's name, which a client may not give a
	// dynamic tool of its own.
	Has(name string) bool
	// Names lists them, so creating a chat can warn of a glob of its
	// "tools" that matches none.
	Names() []string
	// RequiresApproval reports a tool whose calls wait for a person's
	// approval by its policy.
	RequiresApproval(name string) bool
	// Describe gives a tool's source and description, shown with a call
	// waiting for approval.
	Describe(name string) (source, description string, ok bool)
	// CheckArgs validates a person's edited arguments of a call; known is
	// false for a tool not offered now, whose arguments cannot be checked.
	CheckArgs(name string, args json.RawMessage) (known bool, err error)
}

// WithServerTools tells the Service about the server-side tools.
func WithServerTools(t ServerTools) Option {
	return func(s *Service) { s.tools = t }
}

// WithBudget replaces the budget the Service checks owners' quotas
// against, which is otherwise the configuration's quotas.defaults on the
// system clock: tests give one with a clock of their own.
func WithBudget(b *quota.Budget) Option {
	return func(s *Service) { s.budget = b }
}

// New returns a Service over the store and pubsub. A nil logger discards.
func New(st store.Store, ps pubsub.PubSub, cfg *config.Config, log *slog.Logger, opts ...Option) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{st: st, ps: ps, cfg: cfg, log: log, budget: &quota.Budget{Defaults: cfg.Quotas.Defaults}, files: st}
	for _, o := range opts {
		o(s)
	}
	return s
}

// limits returns the chat limits of the configuration.
func (s *Service) limits() chat.Limits { return s.cfg.Limits.Chat() }

// GetChat returns the owner's chat; store.ErrNotFound if it does not exist
// or belongs to another owner.
func (s *Service) GetChat(ctx context.Context, owner, id string) (chat.Chat, error) {
	c, err := s.owned(ctx, owner, id)
	if err != nil {
		return chat.Chat{}, err
	}
	if err := s.withRequiredAction(ctx, s.st, &c); err != nil {
		return chat.Chat{}, fmt.Errorf("get chat %s: %w", id, err)
	}
	// The last turn shows the chat's structured output and, mostly, its
	// context: one read on an index serves both.
	turn, err := s.st.LastTurn(ctx, c.ID)
	if err != nil {
		return chat.Chat{}, fmt.Errorf("get chat %s: %w", id, err)
	}
	c.Output = chat.LastOutput(turn)
	if err := s.withContext(ctx, &c, turn); err != nil {
		return chat.Chat{}, fmt.Errorf("get chat %s: %w", id, err)
	}
	return c, nil
}

// ListChats returns one page of the owner's chats; q.Owner is set to owner.
func (s *Service) ListChats(ctx context.Context, owner string, q store.ChatQuery) (store.ChatPage, error) {
	q.Owner = owner
	page, err := s.st.ListChats(ctx, q)
	if err != nil {
		return store.ChatPage{}, fmt.Errorf("list chats: %w", err)
	}
	for i := range page.Chats {
		if err := s.withRequiredAction(ctx, s.st, &page.Chats[i]); err != nil {
			return store.ChatPage{}, fmt.Errorf("list chats: %w", err)
		}
	}
	return page, nil
}

// ListMessages returns up to limit messages of the owner's chat with id >
// after, in id order.
func (s *Service) ListMessages(ctx context.Context, owner, id string, after int64, limit int) ([]chat.Message, error) {
	if _, err := s.owned(ctx, owner, id); err != nil {
		return nil, err
	}
	msgs, err := s.st.ListMessages(ctx, id, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", id, err)
	}
	return msgs, nil
}

// ListQueued returns the messages waiting in the queue of owner's chat id,
// in arrival order: sent while the chat was busy, not in the history yet.
func (s *Service) ListQueued(ctx context.Context, owner, id string) ([]chat.QueuedMessage, error) {
	if _, err := s.owned(ctx, owner, id); err != nil {
		return nil, err
	}
	q, err := s.st.ListQueued(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list queued messages of %s: %w", id, err)
	}
	return q, nil
}

// owned reads chat id and checks that it belongs to owner (else
// store.ErrNotFound). Its required action is not read: reads of a chat's
// messages or queue need only the check.
func (s *Service) owned(ctx context.Context, owner, id string) (chat.Chat, error) {
	c, err := s.st.GetChat(ctx, id)
	if err == nil && c.Owner != owner {
		err = store.ErrNotFound
	}
	if err != nil {
		return chat.Chat{}, fmt.Errorf("get chat %s: %w", id, err)
	}
	return c, nil
}

// lockOwned locks a chat inside tx and checks that owner owns it.
func lockOwned(ctx context.Context, tx store.Tx, owner, id string) (chat.Chat, error) {
	c, err := tx.LockChat(ctx, id)
	if err != nil {
		return chat.Chat{}, fmt.Errorf("lock chat %s: %w", id, err)
	}
	if c.Owner != owner {
		return chat.Chat{}, fmt.Errorf("lock chat %s: %w", id, store.ErrNotFound)
	}
	return c, nil
}

// write runs fn in a transaction and announces the notice fn recorded with
// the commit (events.Commit).
func (s *Service) write(ctx context.Context, fn func(tx store.Tx, n *events.Notice) error) error {
	return events.Commit(ctx, s.st.InTx, s.ps, s.log, fn)
}
