package chatcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/parleyhq/parley/client"
)

// decide posts the decisions on the approvals. When the server refuses them
// (say, edited arguments that do not match the tool's schema) while the
// same approvals still wait, it says why and asks for the decisions again.
func (s *chatSession) decide(ctx context.Context, approvals []client.ToolCall, decisions []client.Decision) error {
	for {
		_, err := s.c.Decide(ctx, s.chatID, decisions)
		var ae *client.APIError
		switch {
		case err == nil:
			for i, d := range decisions {
				if !d.Approve {
					s.answered[approvals[i].ToolCallID] = true // the denial is this person's
				}
			}
			return nil
		case errors.As(err, &ae) && ae.StatusCode == http.StatusConflict:
			fmt.Fprintf(s.info, "(decisions not taken: someone decided first, or the chat moved on; it is %v now)\n", ae.Details["status"])
			return nil
		case !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || !s.stillPending(ctx, approvals):
			return fmt.Errorf("submit the decisions: %w", err)
		}
		fmt.Fprintf(s.info, "the server refused the decisions: %s\ndecide again:\n", ae.Message)
		for i, call := range approvals {
			if decisions[i], err = s.askDecision(ctx, call); err != nil {
				return err
			}
		}
	}
}

// stillPending reports whether the chat waits for decisions on exactly
// these calls.
func (s *chatSession) stillPending(ctx context.Context, approvals []client.ToolCall) bool {
	ch, err := s.c.GetChat(ctx, s.chatID)
	if err != nil || ch.Status != client.StatusRequiresAction || ch.RequiredAction == nil {
		return false
	}
	var pending []string
	for _, c := range ch.RequiredAction.ToolCalls {
		if c.NeedsApproval() {
			pending = append(pending, c.ToolCallID)
		}
	}
	if len(pending) != len(approvals) {
		return false
	}
	for i, c := range approvals {
		if pending[i] != c.ToolCallID {
			return false
		}
	}
	return true
}

// askDecision shows a call that needs approval and asks for the decision:
// y approves, n denies (with an optional reason), e approves with edited
// arguments.
func (s *chatSession) askDecision(ctx context.Context, call client.ToolCall) (client.Decision, error) {
	fmt.Fprintf(s.info, "tool call %s needs your approval", call.ToolName)
	if call.Source != "" {
		fmt.Fprintf(s.info, " (source %s)", call.Source)
	}
	fmt.Fprintln(s.info)
	if desc := strings.TrimSpace(call.Description); desc != "" {
		fmt.Fprintf(s.info, "  %s\n", strings.ReplaceAll(desc, "\n", "\n  "))
	}
	fmt.Fprintf(s.info, "  args: %s\n", prettyJSON(call.Args, "  "))
	for {
		line, err := s.ask(ctx, "approve? [y/n/e(dit)] ")
		if err != nil {
			return client.Decision{}, s.decisionInputErr(call, err)
		}
		switch strings.ToLower(line) {
		case "y", "yes":
			return client.Approve(call.ToolCallID), nil
		case "n", "no":
			fmt.Fprint(s.info, "reason (optional)> ")
			reason, err := s.readLine(ctx)
			if err != nil {
				fmt.Fprintln(s.info)
				return client.Decision{}, s.decisionInputErr(call, err)
			}
			return client.Deny(call.ToolCallID, strings.TrimSpace(reason)), nil
		case "e", "edit":
			args, err := s.editArgs(ctx)
			if err != nil {
				return client.Decision{}, s.decisionInputErr(call, err)
			}
			if args != nil {
				return client.ApproveWithArgs(call.ToolCallID, args), nil
			}
		default:
			fmt.Fprintln(s.info, "answer y (approve), n (deny) or e (edit the arguments, then approve)")
		}
	}
}

// decisionInputErr explains an input that ended before a decision.
func (s *chatSession) decisionInputErr(call client.ToolCall, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("end of input while tool call %s waits for your decision", call.ToolCallID)
	}
	return err
}

// editArgs reads new arguments: a JSON object, on one line or over several
// ended by a blank line. A blank line first, or input that is not a JSON
// object, gives nil (with a notice): the caller asks again.
func (s *chatSession) editArgs(ctx context.Context) (json.RawMessage, error) {
	fmt.Fprintln(s.info, "new arguments, a JSON object (over several lines, end with a blank line; a blank line first cancels):")
	var buf strings.Builder
	for {
		if buf.Len() == 0 {
			fmt.Fprint(s.info, "args> ")
		} else {
			fmt.Fprint(s.info, "...> ")
		}
		line, err := s.readLine(ctx)
		if err != nil {
			fmt.Fprintln(s.info)
			return nil, err
		}
		if strings.TrimSpace(line) == "" {
			if buf.Len() == 0 {
				fmt.Fprintln(s.info, "(edit cancelled)")
				return nil, nil
			}
			break
		}
		buf.WriteString(line + "\n")
		if json.Valid([]byte(buf.String())) {
			break
		}
	}
	args, err := jsonObject(buf.String())
	if err != nil {
		fmt.Fprintf(s.info, "not a JSON object: %v\n", err)
		return nil, nil
	}
	return args, nil
}

// jsonObject checks that text is one JSON object and returns it compacted.
func jsonObject(text string) (json.RawMessage, error) {
	text = strings.TrimSpace(text)
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, err
	}
	if _, ok := v.(map[string]any); !ok {
		kind := "null"
		switch v.(type) {
		case []any:
			kind = "an array"
		case string:
			kind = "a string"
		case float64:
			kind = "a number"
		case bool:
			kind = "a boolean"
		}
		return nil, fmt.Errorf("got %s, want an object {...}", kind)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// prettyJSON renders arguments indented, their lines after the first
// starting with prefix.
func prettyJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, prefix, "  ") != nil {
		return string(raw)
	}
	return b.String()
}
