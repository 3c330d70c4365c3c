package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
)

// overBudget checks the chat owner's spend and token budgets before a model
// call (a step's, or a compaction's: both spend) and returns the outcome
// that ends the run, in error with kind spend_limit, once one is reached;
// nil while there is room. Each step's usage is recorded in the write that
// records the step, before the next step checks, so a budget is reached
// at most one step late per running chat of the owner: the steps already
// under way when the budget ran out. then says how the chat goes on.
func (r *run) overBudget(ctx context.Context, then string) (*stepOutcome, error) {
	b := r.e.cfg.Budget
	if b == nil {
		return nil, nil
	}
	err := r.e.untilAvailable(ctx, r.log, func(ctx context.Context) error {
		return b.Check(ctx, r.e.st, r.chat.Owner)
	})
	var exceeded *quota.ExceededError
	switch {
	case errors.As(err, &exceeded):
	case err != nil:
		return nil, fmt.Errorf("check the budget: %w", err)
	default:
		return nil, nil
	}
	r.log.Info("the owner's budget is reached; the run stops", "owner", r.chat.Owner,
		"period", exceeded.Period, "unit", exceeded.Unit, "limit", exceeded.Limit, "spent", exceeded.Spent)
	return ptr(stepOutcome{failure: spendLimit(exceeded, then), open: chat.ReasonUnknownOutcome}), nil
}

// spendLimit is the chat's last_error when its run stopped for e: what was
// reached, until when, and how the chat goes on. It is not retryable: a
// retry before the budget allows stops again.
func spendLimit(e *quota.ExceededError, then string) *chat.ChatError {
	what := "spend limit"
	if e.Unit == "tokens" {
		what = "token limit"
	}
	return &chat.ChatError{Kind: chat.KindSpendLimit, Message: fmt.Sprintf(
		"the owner's %s %s of %d %s is reached (%d spent), so the run stopped before calling the model; "+
			"the budget resets at %s, or an admin can raise it; %s once it allows",
		e.Period, what, e.Limit, e.Unit, e.Spent, e.ResetsAt.UTC().Format(time.RFC3339), then)}
}

// How a chat stopped by its budget goes on.
const (
	goOnRetry   = "retry (POST /retry) or send a new message to go on"
	goOnCompact = "compact again (POST /compact) or send a message"
)
