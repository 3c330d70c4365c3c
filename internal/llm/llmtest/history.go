package llmtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The fakes check the conversation a request carries the way the real APIs
// do, and refuse one whose tool calls and results do not pair up with the
// API's HTTP 400 and error body, so a test that builds a bad history fails
// where it would fail in production. Only the pairing rules are checked;
// what the APIs accept (consecutive turns of one role on Anthropic, outputs
// matched by id rather than by position on Responses) is accepted here too.

// historyError is why a fake refused a request's history: the API's message
// and, for OpenAI, the param it names.
type historyError struct {
	message string
	param   string
}

// chatHistoryError checks a Chat Completions request's messages: every
// assistant message with tool_calls must be followed by a tool message for
// each of its calls (in any order) before any other message, and every tool
// message must answer a call of the assistant message just before its run
// of tool messages. Duplicate answers to one call are let through.
func chatHistoryError(req openaiRequest) *historyError {
	var msgs []struct {
		Role      string `json:"role"`
		ToolCalls []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	}
	if json.Unmarshal(req.field("messages"), &msgs) != nil {
		return nil // not a list of messages: not a history to judge
	}
	open := -1                  // the assistant message whose calls the current tool messages answer
	var calls, pending []string // its calls, and those not answered yet
	missing := func() *historyError {
		return &historyError{
			message: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
				"The following tool_call_ids did not have response messages: " + strings.Join(pending, ", "),
			param: fmt.Sprintf("messages.[%d].role", open),
		}
	}
	for i, m := range msgs {
		if m.Role == "tool" {
			if open < 0 {
				return &historyError{
					message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
					param:   fmt.Sprintf("messages.[%d].role", i),
				}
			}
			if !slices.Contains(calls, m.ToolCallID) {
				return &historyError{
					message: fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", m.ToolCallID),
					param:   fmt.Sprintf("messages.[%d].tool_call_id", i),
				}
			}
			pending = slices.DeleteFunc(pending, func(id string) bool { return id == m.ToolCallID })
			continue
		}
		if len(pending) > 0 {
			return missing()
		}
		open, calls, pending = -1, nil, nil
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			open = i
			for _, c := range m.ToolCalls {
				calls = append(calls, c.ID)
			}
			pending = slices.Clone(calls)
		}
	}
	if len(pending) > 0 {
		return missing()
	}
	return nil
}

// responsesHistoryError checks a Responses request's input items, in order:
// each function_call_output must answer an earlier function_call with its
// call_id that no other output answered, and each function_call must get an
// output somewhere after it. Outputs are not checked when the request
// continues a stored response (previous_response_id), whose calls the fake
// cannot see.
func responsesHistoryError(req openaiRequest) *historyError {
	var items []struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
	}
	if json.Unmarshal(req.field("input"), &items) != nil {
		return nil // a string input, or none: no calls to pair
	}
	continues := string(req.field("previous_response_id")) != "null"
	var unanswered []string // calls in input order, each until an output answers it
	for _, it := range items {
		switch it.Type {
		case "function_call":
			unanswered = append(unanswered, it.CallID)
		case "function_call_output":
			i := slices.Index(unanswered, it.CallID)
			if i < 0 {
				if continues {
					continue
				}
				return &historyError{
					message: fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID),
					param:   "input",
				}
			}
			unanswered = slices.Delete(unanswered, i, i+1)
		}
	}
	if len(unanswered) > 0 {
		return &historyError{message: fmt.Sprintf("No tool output found for function call %s.", unanswered[0]), param: "input"}
	}
	return nil
}

// anthropicHistoryError checks a Messages request's messages after merging
// consecutive messages of one role, as the API does: every tool_use block of
// an assistant turn must have a tool_result block in the user turn right
// after it, and every tool_result block must answer a tool_use block of the
// assistant turn right before it. Indexes in the messages name the request's
// own messages and blocks: the message holding the first unanswered call, or
// the stray result's message and its place in that message's content.
func anthropicHistoryError(body []byte) *historyError {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	type block struct {
		typ, id, toolUseID string
		msg, index         int // where the block is in the request
	}
	type turn struct {
		role   string
		blocks []block
	}
	var turns []turn
	for i, m := range req.Messages {
		if len(turns) == 0 || turns[len(turns)-1].role != m.Role {
			turns = append(turns, turn{role: m.Role})
		}
		var blocks []struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			ToolUseID string `json:"tool_use_id"`
		}
		_ = json.Unmarshal(m.Content, &blocks) // a string content has no blocks
		t := &turns[len(turns)-1]
		for j, b := range blocks {
			t.blocks = append(t.blocks, block{typ: b.Type, id: b.ID, toolUseID: b.ToolUseID, msg: i, index: j})
		}
	}
	for k, t := range turns {
		if t.role == "user" {
			var asked []string
			if k > 0 && turns[k-1].role == "assistant" {
				for _, b := range turns[k-1].blocks {
					if b.typ == "tool_use" {
						asked = append(asked, b.id)
					}
				}
			}
			for _, b := range t.blocks {
				if b.typ == "tool_result" && !slices.Contains(asked, b.toolUseID) {
					return &historyError{message: fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
						"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", b.msg, b.index, b.toolUseID)}
				}
			}
		}
		if t.role != "assistant" {
			continue
		}
		var answered []string
		if k+1 < len(turns) {
			for _, b := range turns[k+1].blocks {
				if b.typ == "tool_result" {
					answered = append(answered, b.toolUseID)
				}
			}
		}
		var missing []string
		at := -1 // the message of the first unanswered call
		for _, b := range t.blocks {
			if b.typ == "tool_use" && !slices.Contains(answered, b.id) {
				missing = append(missing, b.id)
				if at < 0 {
					at = b.msg
				}
			}
		}
		if len(missing) > 0 {
			return &historyError{message: fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. "+
				"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", at, strings.Join(missing, ", "))}
		}
	}
	return nil
}
