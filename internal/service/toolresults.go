package service

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

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

// IDMismatchError refuses a submission (of tool results, or of decisions)
// whose ids do not match the pending calls exactly.
type IDMismatchError struct {
	Kind      string   // the pending calls' kind: chat.ActionClient (results) or chat.ActionApproval (decisions)
	Missing   []string // pending calls without one
	Unknown   []string // ids that are not pending calls
	Duplicate []string // ids given more than once
}

func (e *IDMismatchError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		what := "results"
		if e.Kind == chat.ActionApproval {
			what = "decisions"
		}
		parts = append(parts, "missing "+what+" for "+strings.Join(e.Missing, ", "))
	}
	if len(e.Unknown) > 0 {
		parts = append(parts, "unknown tool call ids "+strings.Join(e.Unknown, ", "))
	}
	if len(e.Duplicate) > 0 {
		parts = append(parts, "duplicate tool call ids "+strings.Join(e.Duplicate, ", "))
	}
	return strings.Join(parts, "; ")
}

// OutputError refuses a result whose output fails its tool's output_schema
// (400); Err says what is wrong.
type OutputError struct {
	ToolCallID string
	Tool       string
	Err        error
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("tool results: the output of %s (%s) does not satisfy the tool's output_schema: %v", e.ToolCallID, e.Tool, e.Err)
}

// SubmitToolResults persists the client's results for the owner's chat in
// requires_action and makes it pending, in one transaction: the first
// submission wins, every later or concurrent one finds the chat in another
// status (StatusError, 409), and one after the chat's deadline is refused
// (DeadlineError, 409). The ids must match the pending calls exactly.
// A chat that also waits for approvals stays in requires_action. The output
// of a result that is not an error must satisfy its tool's output_schema,
// if it declares one (OutputError); then nothing is stored.
func (s *Service) SubmitToolResults(ctx context.Context, owner, id string, results []ToolResult) (chat.Chat, error) {
	ids := make([]string, len(results))
	byID := make(map[string]ToolResult, len(results))
	for i, r := range results {
		if len(r.Output) == 0 {
			r.Output = json.RawMessage("null")
		}
		ids[i] = r.ToolCallID
		if _, dup := byID[r.ToolCallID]; !dup {
			byID[r.ToolCallID] = r
		}
	}
	c, err := s.answerPending(ctx, owner, id, answerResults, ids, func(c chat.Chat, pending []chat.ToolCall) ([]chat.Part, error) {
		parts := make([]chat.Part, len(pending))
		for i, call := range pending {
			r := byID[call.ToolCallID]
			if err := checkOutput(c.DynamicTools, call, r); err != nil {
				return nil, err
			}
			// Checked whole, stored capped at tools.max_result_bytes as a
			// server-side result is.
			parts[i] = chat.Part{Type: chat.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Output: r.Output, IsError: r.IsError}.
				CapOutput(s.cfg.Tools.MaxResultBytes)
		}
		return parts, nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("submit tool results to %s: %w", id, err)
	}
	return c, nil
}

// checkOutput checks r, the result of call, against its tool's
// output_schema; an error result is not checked.
func checkOutput(tools []chat.DynamicTool, call chat.ToolCall, r ToolResult) error {
	if r.IsError {
		return nil
	}
	for _, t := range tools {
		if t.Name == call.ToolName {
			if err := t.CheckOutput(r.Output); err != nil {
				return &OutputError{ToolCallID: call.ToolCallID, Tool: call.ToolName, Err: err}
			}
			return nil
		}
	}
	return nil
}

// What a submission answers: a client's results, or a person's decisions.
const (
	answerResults   = chat.ActionClient
	answerDecisions = chat.ActionApproval
)

// DeadlineError refuses results or decisions that come once the chat's
// deadline for them has passed (409): the calls still open are answered in
// their place (no result; denied), so nothing of the submission is written.
type DeadlineError struct {
	ChatID   string
	Deadline time.Time
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("the deadline for results and decisions passed at %s; the calls still open are answered without them (no result, or denied)",
		e.Deadline.Format(time.RFC3339Nano))
}

// beforeDeadline refuses an answer to c, locked in tx, once c's deadline has
// passed on the database's clock, the one it expires by: an answer is taken
// before the deadline or not at all, however late the engine's sweep
// answers in its place.
func beforeDeadline(ctx context.Context, tx store.Tx, c chat.Chat) error {
	if c.ActionDeadline == nil {
		return nil
	}
	now, err := tx.Now(ctx)
	if err != nil {
		return err
	}
	if !c.ActionDeadline.After(now) {
		return &DeadlineError{ChatID: c.ID, Deadline: *c.ActionDeadline}
	}
	return nil
}

// answerPending records, for the owner's chat in requires_action, the
// answers to its pending calls of one kind, in one transaction: the chat's
// deadline must not have passed (DeadlineError), ids must name exactly
// those calls (IDMismatchError), build turns them into the parts of one
// tool message (or refuses, and nothing is stored), and the chat becomes
// pending once no call of either kind waits. The first submission wins: a
// later or concurrent one finds nothing of its kind pending (StatusError,
// 409).
func (s *Service) answerPending(ctx context.Context, owner, id, kind string, ids []string, build func(c chat.Chat, pending []chat.ToolCall) ([]chat.Part, error)) (chat.Chat, error) {
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = lockOwned(ctx, tx, owner, id); err != nil {
			return err
		}
		what := map[string]string{answerResults: "tool results", answerDecisions: "decisions"}[kind]
		if c.Status != chat.RequiresAction {
			return &StatusError{ChatID: id, Status: c.Status, Reason: what + " are accepted only while the chat is requires_action"}
		}
		if err := beforeDeadline(ctx, tx, c); err != nil {
			return err
		}
		tail, err := tx.LastTurn(ctx, id)
		if err != nil {
			return err
		}
		actions := chat.PendingActions(tail, c.DynamicTools)
		pending := chat.OfKind(actions, kind)
		if len(pending) == 0 {
			reason := "no tool call waits for the client's result (the chat waits for a person's approval: POST /approvals)"
			if kind == answerDecisions {
				reason = "no call waits for approval (decided already, or the chat waits for the client's results: POST /tool-results)"
			}
			return &StatusError{ChatID: id, Status: c.Status, Reason: reason}
		}
		if err := matchIDs(pending, ids, kind); err != nil {
			return err
		}
		parts, err := build(c, pending)
		if err != nil {
			return err
		}
		m := chat.Message{ChatID: id, Role: chat.RoleTool, Parts: parts}
		if err := tx.InsertMessage(ctx, &m); err != nil {
			return fmt.Errorf("insert %s: %w", what, err)
		}
		n.Message(m)
		c, err = resumeIfAnswered(ctx, tx, n, c, len(actions) > len(pending))
		return err
	})
	if err != nil {
		return chat.Chat{}, err
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

// matchIDs checks that ids name exactly the pending calls (of kind), once
// each.
func matchIDs(pending []chat.ToolCall, ids []string, kind string) error {
	want := make(map[string]bool, len(pending))
	for _, c := range pending {
		want[c.ToolCallID] = true
	}
	e := IDMismatchError{Kind: kind}
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
		if call.Kind == chat.ActionApproval {
			ra.ToolCalls[i].Source, ra.ToolCalls[i].Description, _ = s.describe(call.ToolName)
		}
	}
	if c.ActionDeadline != nil {
		ra.Deadline = *c.ActionDeadline
	}
	c.RequiredAction = ra
	return nil
}
