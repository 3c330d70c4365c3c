package service

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

// checkBudget refuses new work of the owner, work that would start a run,
// with a *quota.ExceededError once one of its spend or token budgets is
// reached. It reads before anything is written, so a refused request
// changes nothing. Work that resumes a run (retry, regenerate, edit, tool
// results, approvals, compact) is not refused here: the engine checks the
// budget before each model call and ends such a run in error with kind
// spend_limit, which retry continues once the budget allows.
func (s *Service) checkBudget(ctx context.Context, owner string) error {
	if err := s.budget.Check(ctx, s.st, owner); err != nil {
		return fmt.Errorf("budget of %s: %w", owner, err)
	}
	return nil
}

// checkChats refuses, with a *quota.CapError, a new chat of an owner who
// has max_chats chats already. It counts inside tx, the transaction that
// creates the chat, under the owner's lock (store.Tx.LockOwner), so
// creations of one owner that race each other never pass the cap.
func (s *Service) checkChats(ctx context.Context, tx store.Tx, owner string) error {
	l, err := s.budget.Limits(ctx, tx, owner)
	if err != nil || l.MaxChats <= 0 {
		return err
	}
	if err := tx.LockOwner(ctx, owner); err != nil {
		return fmt.Errorf("count chats of %s: %w", owner, err)
	}
	n, err := tx.CountChats(ctx, owner)
	if err != nil {
		return fmt.Errorf("count chats of %s: %w", owner, err)
	}
	if n >= l.MaxChats {
		return &quota.CapError{Owner: owner, Key: "max_chats", Limit: int64(l.MaxChats)}
	}
	return nil
}
