package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// Decision is a person's answer to one call waiting for approval.
type Decision struct {
	ToolCallID string          `json:"tool_call_id"`
	Approve    bool            `json:"approve"`
	Args       json.RawMessage `json:"args"`   // edited arguments; absent: as the model gave them
	Reason     string          `json:"reason"` // shown to the model when denied
}

// Decider is who decides: the owner and the name of the token used.
type Decider struct {
	Owner string
	Token string
}

// ArgsError refuses a decision whose edited arguments fail the tool's
// schema (400).
type ArgsError struct {
	ToolCallID string
	Err        error
}

func (e *ArgsError) Error() string {
	return fmt.Sprintf("decisions: the edited args of %s: %v", e.ToolCallID, e.Err)
}

// maxReasonBytes bounds a denial's reason, which the model reads.
const maxReasonBytes = 4096

// SubmitApprovals persists the decisions on the calls of the owner's chat
// that wait for approval, in one transaction: the decisions themselves (who,
// when, what) and, for each denied call, its error result. The chat becomes
// pending once no call waits for anyone, so a chat that also waits for a
// client's results stays in requires_action. The first submission wins: a
// later or concurrent one finds no approval pending (StatusError, 409). The
// ids must match the waiting calls exactly; edited args must satisfy the
// tool's schema (ArgsError).
func (s *Service) SubmitApprovals(ctx context.Context, by Decider, id string, decisions []Decision) (chat.Chat, error) {
	for i, d := range decisions {
		if len(d.Reason) > maxReasonBytes {
			return chat.Chat{}, &chat.ValidationError{Field: "decisions.reason", Message: fmt.Sprintf("a reason is at most %d bytes", maxReasonBytes)}
		}
		if a := bytes.TrimSpace(d.Args); string(a) == "null" {
			decisions[i].Args = nil // as if absent
		}
	}
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = lockOwned(ctx, tx, by.Owner, id); err != nil {
			return err
		}
		if c.Status != chat.RequiresAction {
			return &StatusError{ChatID: id, Status: c.Status, Reason: "decisions are accepted only while the chat is requires_action with calls waiting for approval"}
		}
		tail, err := tx.LastTurn(ctx, id)
		if err != nil {
			return err
		}
		actions := chat.PendingActions(tail, c.DynamicTools)
		pending := chat.OfKind(actions, chat.ActionApproval)
		if len(pending) == 0 {
			return &StatusError{ChatID: id, Status: c.Status, Reason: "no call waits for approval (decided already, or the chat waits for the client's results: POST /tool-results)"}
		}
		byID := make(map[string]Decision, len(decisions))
		ids := make([]string, len(decisions))
		for i, d := range decisions {
			ids[i] = d.ToolCallID
			if _, dup := byID[d.ToolCallID]; !dup {
				byID[d.ToolCallID] = d
			}
		}
		if err := matchIDs(pending, ids, "decisions"); err != nil {
			return err
		}
		now := time.Now().UTC()
		var parts []chat.Part
		for _, call := range pending {
			d := byID[call.ToolCallID]
			var args json.RawMessage
			if a := bytes.TrimSpace(d.Args); len(a) > 0 && d.Approve {
				if a[0] != '{' || !json.Valid(a) {
					return &ArgsError{ToolCallID: call.ToolCallID, Err: fmt.Errorf("want a JSON object")}
				}
				if s.tools == nil {
					return &ArgsError{ToolCallID: call.ToolCallID, Err: fmt.Errorf("tool %q is not available now", call.ToolName)}
				}
				if err := s.tools.CheckArgs(call.ToolName, d.Args); err != nil {
					return &ArgsError{ToolCallID: call.ToolCallID, Err: err}
				}
				args = d.Args
			}
			parts = append(parts, chat.Part{Type: chat.PartToolDecision, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Args: args,
				Decision: &chat.Decision{Approved: d.Approve, Reason: d.Reason, DecidedBy: by.Owner, Token: by.Token, DecidedAt: now}})
			if !d.Approve {
				parts = append(parts, chat.Part{Type: chat.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName,
					Output: chat.DeniedOutput(d.Reason), IsError: true})
			}
		}
		m := chat.Message{ChatID: id, Role: chat.RoleTool, Parts: parts}
		if err := tx.InsertMessage(ctx, &m); err != nil {
			return fmt.Errorf("insert decisions: %w", err)
		}
		n.Message(m)
		c, err = resumeIfAnswered(ctx, tx, n, c, len(actions) > len(pending))
		return err
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("submit decisions to %s: %w", id, err)
	}
	return c, s.withRequiredAction(ctx, s.st, &c)
}
