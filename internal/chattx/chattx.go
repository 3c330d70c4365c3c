// Package chattx holds the writes to a chat's history that both the
// service (a client's request) and the engine (a run) make inside their
// transactions: moving queued messages into the history and answering the
// tool calls left open. Both layers call it; it calls neither.
package chattx

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// InsertUser appends a person's user message to the chat's history: it
// starts a turn, answered in the format the message asked for (nil: the
// chat's), with no output repair made yet. It is the one place a person's
// message enters a history after the chat's creation, so the turn's format
// is on the chat's row whatever happens to the run (a compaction, a pause
// for approvals or a client's results, a crash).
func InsertUser(ctx context.Context, tx store.Tx, chatID string, parts []chat.Part, format *chat.ResponseFormat, n *events.Notice) (*chat.Message, error) {
	m := chat.Message{ChatID: chatID, Role: chat.RoleUser, Parts: parts}
	if err := tx.InsertMessage(ctx, &m); err != nil {
		return nil, fmt.Errorf("insert message: %w", err)
	}
	if err := tx.StartTurn(ctx, chatID, format); err != nil {
		return nil, err
	}
	n.Message(m)
	return &m, nil
}

// PromoteQueued moves a chat's queued messages into its history, in arrival
// order, and reports whether there were any. Every path that ends a run or
// stops an action calls it, so a message a client was told is queued is
// never stranded; a message posted to an idle chat calls it too, so it
// never overtakes an older one.
func PromoteQueued(ctx context.Context, tx store.Tx, chatID string, n *events.Notice) (bool, error) {
	queued, err := tx.ListQueued(ctx, chatID)
	if err != nil {
		return false, fmt.Errorf("list queued: %w", err)
	}
	for _, q := range queued {
		if _, err := InsertUser(ctx, tx, chatID, q.Parts, q.ResponseFormat, n); err != nil {
			return false, err
		}
		if err := tx.DeleteQueued(ctx, q.ID); err != nil {
			return false, fmt.Errorf("delete queued %d: %w", q.ID, err)
		}
	}
	return len(queued) > 0, nil
}

// AnswerOpenCalls answers every tool call of the chat's last assistant
// message that has no result yet with an error result saying reason, in
// one tool message, so no call is left dangling. It is for a writer that
// knows what became of the calls (the run that made them); StopOpenCalls
// is for one that does not.
func AnswerOpenCalls(ctx context.Context, tx store.Tx, chatID, reason string, n *events.Notice) error {
	tail, err := tx.LastTurn(ctx, chatID)
	if err != nil {
		return fmt.Errorf("read the last turn: %w", err)
	}
	return insertResults(ctx, tx, chatID, chat.SyntheticResults(chat.UnresolvedCalls(tail), reason), n)
}

// StopOpenCalls answers the open calls of chat c, which no run holds, when
// its work is stopped (an interrupt, a new message that cuts it short):
// the calls that may have run "outcome unknown", the others reason
// (chat.OpenCalls.Stopped), in one tool message. needsDecision is as for
// chat.SortOpenCalls.
func StopOpenCalls(ctx context.Context, tx store.Tx, c chat.Chat, needsDecision func(name string) bool, reason string, n *events.Notice) error {
	tail, err := tx.LastTurn(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("read the last turn: %w", err)
	}
	return insertResults(ctx, tx, c.ID, chat.SortOpenCalls(tail, c.DynamicTools, needsDecision).Stopped(reason), n)
}

// insertResults writes results as one tool message, if there are any.
func insertResults(ctx context.Context, tx store.Tx, chatID string, results []chat.Part, n *events.Notice) error {
	if len(results) == 0 {
		return nil
	}
	m := chat.Message{ChatID: chatID, Role: chat.RoleTool, Parts: results}
	if err := tx.InsertMessage(ctx, &m); err != nil {
		return fmt.Errorf("insert the results of open calls: %w", err)
	}
	n.Message(m)
	return nil
}
