package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
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

// UnavailableToolError refuses edited args for a tool that is not offered
// now (its source may be reconnecting), so they cannot be checked (409: try
// again, or approve without edits).
type UnavailableToolError struct{ Tool string }

func (e *UnavailableToolError) Error() string {
	return fmt.Sprintf("tool %q is not available now, so edited args cannot be checked; try again, or decide without edits", e.Tool)
}

// describe is ServerTools.Describe, false without server-side tools.
func (s *Service) describe(name string) (source, description string, ok bool) {
	if s.tools == nil {
		return "", "", false
	}
	return s.tools.Describe(name)
}

// maxReasonBytes bounds a denial's reason, which the model reads.
const maxReasonBytes = 4096

// SubmitApprovals persists the decisions on the calls of the owner's chat
// that wait for approval, in one transaction: the decisions themselves (who,
// when, what) and, for each denied call, its error result. The chat becomes
// pending once no call waits for anyone, so a chat that also waits for a
// client's results stays in requires_action. The first submission wins: a
// later or concurrent one finds no approval pending (StatusError, 409), and
// one after the chat's deadline is refused (DeadlineError, 409). The ids
// must match the waiting calls exactly; edited args must satisfy the tool's
// schema (ArgsError).
func (s *Service) SubmitApprovals(ctx context.Context, by Decider, id string, decisions []Decision) (chat.Chat, error) {
	for i, d := range decisions {
		if len(d.Reason) > maxReasonBytes {
			return chat.Chat{}, &chat.ValidationError{Field: "decisions.reason", Message: fmt.Sprintf("a reason is at most %d bytes", maxReasonBytes)}
		}
		if a := bytes.TrimSpace(d.Args); string(a) == "null" {
			decisions[i].Args = nil // as if absent
		}
	}
	byID := make(map[string]Decision, len(decisions))
	ids := make([]string, len(decisions))
	for i, d := range decisions {
		ids[i] = d.ToolCallID
		if _, dup := byID[d.ToolCallID]; !dup {
			byID[d.ToolCallID] = d
		}
	}
	now := time.Now().UTC()
	c, err := s.answerPending(ctx, by.Owner, id, answerDecisions, ids, func(_ chat.Chat, pending []chat.ToolCall) ([]chat.Part, error) {
		var parts []chat.Part
		for _, call := range pending {
			d := byID[call.ToolCallID]
			args, err := s.editedArgs(call, d)
			if err != nil {
				return nil, err
			}
			parts = append(parts, chat.Part{Type: chat.PartToolDecision, ToolCallID: call.ToolCallID, ToolName: call.ToolName, Args: args,
				Decision: &chat.Decision{Approved: d.Approve, Reason: d.Reason, DecidedBy: by.Owner, Token: by.Token, DecidedAt: now}})
			if !d.Approve {
				parts = append(parts, chat.Part{Type: chat.PartToolResult, ToolCallID: call.ToolCallID, ToolName: call.ToolName,
					Output: chat.DeniedOutput(d.Reason), IsError: true})
			}
		}
		return parts, nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("submit decisions to %s: %w", id, err)
	}
	return c, nil
}

// editedArgs checks the arguments a person gave with an approval: none
// (nil), or a JSON object the tool's schema accepts.
func (s *Service) editedArgs(call chat.ToolCall, d Decision) (json.RawMessage, error) {
	a := bytes.TrimSpace(d.Args)
	if len(a) == 0 || !d.Approve {
		return nil, nil
	}
	if a[0] != '{' || !json.Valid(a) {
		return nil, &ArgsError{ToolCallID: call.ToolCallID, Err: fmt.Errorf("want a JSON object")}
	}
	if s.tools == nil {
		return nil, &UnavailableToolError{Tool: call.ToolName}
	}
	known, err := s.tools.CheckArgs(call.ToolName, a)
	if !known {
		// Its source is reconnecting, say: the args may be fine.
		return nil, &UnavailableToolError{Tool: call.ToolName}
	}
	if err != nil {
		return nil, &ArgsError{ToolCallID: call.ToolCallID, Err: err}
	}
	return d.Args, nil
}
