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

// ToolResultsError refuses a submission (of tool results, or of decisions)
// whose ids do not match the pending calls exactly.
type ToolResultsError struct {
	Of        string   // what the submission gives: "results" or "decisions"
	Missing   []string // pending calls without one
	Unknown   []string // ids that are not pending calls
	Duplicate []string // ids given more than once
}

func (e *ToolResultsError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "missing "+e.Of+" for "+strings.Join(e.Missing, ", "))
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
		actions := chat.PendingActions(tail, c.DynamicTools)
		pending := chat.OfKind(actions, chat.ActionClient)
		if len(pending) == 0 {
			return &StatusError{ChatID: id, Status: c.Status, Reason: "no tool call waits for the client's result (the chat waits for a person's approval: POST /approvals)"}
		}
		byID := make(map[string]ToolResult, len(results))
		ids := make([]string, len(results))
		for i, r := range results {
			if len(r.Output) == 0 {
				r.Output = json.RawMessage("null")
			}
			ids[i] = r.ToolCallID
			if _, dup := byID[r.ToolCallID]; !dup {
				byID[r.ToolCallID] = r
			}
		}
		if err := matchIDs(pending, ids, "results"); err != nil {
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
		c, err = resumeIfAnswered(ctx, tx, n, c, len(actions) > len(pending))
		return err
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("submit tool results to %s: %w", id, err)
	}
	return c, s.withRequiredAction(ctx, s.st, &c)
}

// resumeIfAnswered makes a requires_action chat pending, unless calls of
// another kind still wait (others), and announces it.
func resumeIfAnswered(ctx context.Context, tx store.Tx, n *events.Notice, c chat.Chat, others bool) (chat.Chat, error) {
	if others {
		return c, nil
	}
	after, err := tx.TransitionChat(ctx, c.ID, store.Transition{From: chat.RequiresAction, To: chat.Pending})
	if err != nil {
		return c, fmt.Errorf("chat %s to pending: %w", c.ID, err)
	}
	n.StatusChanged(chat.RequiresAction, after)
	return after, nil
}

// matchIDs checks that ids name exactly the pending calls, once each; of
// says what the ids come with ("results", "decisions").
func matchIDs(pending []chat.ToolCall, ids []string, of string) error {
	want := make(map[string]bool, len(pending))
	for _, c := range pending {
		want[c.ToolCallID] = true
	}
	e := ToolResultsError{Of: of}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		switch {
		case seen[id]:
			if !slices.Contains(e.Duplicate, id) {
				e.Duplicate = append(e.Duplicate, id)
			}
		case !want[id]:
			e.Unknown = append(e.Unknown, id)
		}
		seen[id] = true
	}
	for _, c := range pending {
		if !seen[c.ToolCallID] {
			e.Missing = append(e.Missing, c.ToolCallID)
		}
	}
	if len(e.Missing)+len(e.Unknown)+len(e.Duplicate) > 0 {
		return &e
	}
	return nil
}

// withRequiredAction fills c.RequiredAction when c waits for a client's
// results or a person's decisions; a call waiting for approval shows its
// tool's source and description.
func (s *Service) withRequiredAction(ctx context.Context, r store.Reader, c *chat.Chat) error {
	if c.Status != chat.RequiresAction {
		c.RequiredAction = nil
		return nil
	}
	tail, err := r.LastTurn(ctx, c.ID)
	if err != nil {
		return err
	}
	ra := &chat.RequiredAction{ToolCalls: chat.PendingActions(tail, c.DynamicTools)}
	for i, call := range ra.ToolCalls {
		if call.Kind == chat.ActionApproval && s.tools != nil {
			ra.ToolCalls[i].Source, ra.ToolCalls[i].Description, _ = s.tools.Describe(call.ToolName)
		}
	}
	if c.ActionDeadline != nil {
		ra.Deadline = *c.ActionDeadline
	}
	c.RequiredAction = ra
	return nil
}
