package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// ToolResult is one client result for a dynamic tool call.
type ToolResult struct {
	ToolCallID string          `json:"tool_call_id"`
	Output     json.RawMessage `json:"output"`
	IsError    bool            `json:"is_error"`
}

// ToolResultsError refuses a submission whose ids do not match the pending
// calls exactly.
type ToolResultsError struct {
	Missing   []string // pending calls without a result
	Unknown   []string // ids that are not pending calls
	Duplicate []string // ids given more than once
}

func (e *ToolResultsError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "missing results for "+strings.Join(e.Missing, ", "))
	}
	if len(e.Unknown) > 0 {
		parts = append(parts, "unknown tool call ids "+strings.Join(e.Unknown, ", "))
	}
	if len(e.Duplicate) > 0 {
		parts = append(parts, "duplicate tool call ids "+strings.Join(e.Duplicate, ", "))
	}
	return strings.Join(parts, "; ")
}

// SubmitToolResults persists the client's results for the owner's chat in
// requires_action and makes it pending, in one transaction: the first
// submission wins, every later or concurrent one finds the chat in another
// status (StatusError, 409). The ids must match the pending calls exactly.
func (s *Service) SubmitToolResults(ctx context.Context, owner, id string, results []ToolResult) (chat.Chat, error) {
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = lockOwned(ctx, tx, owner, id); err != nil {
			return err
		}
		if c.Status != chat.RequiresAction {
			return &StatusError{ChatID: id, Status: c.Status, Reason: "tool results are accepted only while the chat is requires_action"}
		}
		tail, err := tx.LastTurn(ctx, id)
		if err != nil {
			return err
		}
		pending := chat.PendingDynamicCalls(tail, c.DynamicTools)
		byID, err := matchResults(pending, results)
		if err != nil {
			return err
		}
		parts := make([]chat.Part, len(pending))
		for i, call := range pending {
			r := byID[call.ToolCallID]
			parts[i] = chat.Part{Type: chat.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Output: r.Output, IsError: r.IsError}
		}
		m := chat.Message{ChatID: id, Role: chat.RoleTool, Parts: parts}
		if err := tx.InsertMessage(ctx, &m); err != nil {
			return fmt.Errorf("insert tool results: %w", err)
		}
		n.Message(m)
		if c, err = tx.TransitionChat(ctx, id, store.Transition{From: chat.RequiresAction, To: chat.Pending}); err != nil {
			return fmt.Errorf("chat %s to pending: %w", id, err)
		}
		n.StatusChanged(chat.RequiresAction, c)
		return nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("submit tool results to %s: %w", id, err)
	}
	return c, nil
}

// matchResults checks that results answer exactly the pending calls, once
// each, and indexes them by call id. An output that is absent is JSON null.
func matchResults(pending []chat.ToolCall, results []ToolResult) (map[string]ToolResult, error) {
	want := make(map[string]bool, len(pending))
	for _, c := range pending {
		want[c.ToolCallID] = true
	}
	var e ToolResultsError
	byID := make(map[string]ToolResult, len(results))
	for _, r := range results {
		switch _, seen := byID[r.ToolCallID]; {
		case seen:
			if !slices.Contains(e.Duplicate, r.ToolCallID) {
				e.Duplicate = append(e.Duplicate, r.ToolCallID)
			}
		case !want[r.ToolCallID]:
			e.Unknown = append(e.Unknown, r.ToolCallID)
		}
		if len(r.Output) == 0 {
			r.Output = json.RawMessage("null")
		}
		byID[r.ToolCallID] = r
	}
	for _, c := range pending {
		if _, ok := byID[c.ToolCallID]; !ok {
			e.Missing = append(e.Missing, c.ToolCallID)
		}
	}
	if len(e.Missing)+len(e.Unknown)+len(e.Duplicate) > 0 {
		return nil, &e
	}
	return byID, nil
}

// withRequiredAction fills c.RequiredAction when c waits for tool results.
func withRequiredAction(ctx context.Context, r store.Reader, c *chat.Chat) error {
	if c.Status != chat.RequiresAction {
		c.RequiredAction = nil
		return nil
	}
	tail, err := r.LastTurn(ctx, c.ID)
	if err != nil {
		return err
	}
	ra := &chat.RequiredAction{ToolCalls: chat.PendingDynamicCalls(tail, c.DynamicTools)}
	if c.ActionDeadline != nil {
		ra.Deadline = *c.ActionDeadline
	}
	c.RequiredAction = ra
	return nil
}
