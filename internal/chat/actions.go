package chat

import (
	"encoding/json"
	"fmt"
)

// DeniedOutput is the output of the error result of a denied call.
func DeniedOutput(reason string) json.RawMessage {
	s := DeniedPrefix
	if reason != "" {
		s = fmt.Sprintf(reasonDeniedFormat, reason)
	}
	b, _ := json.Marshal(s)
	return b
}

// PendingActions returns what a chat in requires_action waits for: the
// calls of its last assistant message that have neither a result nor a
// decision, in call order, each with its Kind: ActionClient for the chat's
// dynamic tools, ActionApproval for the others (server-side calls the run
// left for a person to decide on; it runs every other server-side call
// before it waits).
func PendingActions(history []Message, dynamic []DynamicTool) []ToolCall {
	decided := Decisions(history)
	var out []ToolCall
	for _, c := range UnresolvedCalls(history) {
		if _, ok := decided[c.ToolCallID]; ok {
			continue
		}
		c.Kind = ActionApproval
		for _, t := range dynamic {
			if t.Name == c.ToolName {
				c.Kind = ActionClient
				break
			}
		}
		out = append(out, c)
	}
	return out
}

// OfKind keeps the calls of one kind.
func OfKind(calls []ToolCall, kind string) []ToolCall {
	var out []ToolCall
	for _, c := range calls {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// Decisions returns the decision parts recorded after the last assistant
// message, by call id.
func Decisions(history []Message) map[string]Part {
	out := map[string]Part{}
	for i := len(history) - 1; i >= 0 && history[i].Role != RoleAssistant; i-- {
		for _, p := range history[i].Parts {
			if p.Type == PartToolDecision && p.Decision != nil {
				out[p.ToolCallID] = p
			}
		}
	}
	return out
}

// ApprovedCalls returns the calls of the last assistant message that a
// person approved and that have no result yet, in call order, with the
// edited arguments where the person gave some: the calls a run must make
// before it calls the model again. started are those of them marked
// started (PartToolStarted): they may have run, so they must not run again.
func ApprovedCalls(history []Message) (notStarted, started []ToolCall) {
	decided := Decisions(history)
	marked := map[string]bool{}
	for i := len(history) - 1; i >= 0 && history[i].Role != RoleAssistant; i-- {
		for _, p := range history[i].Parts {
			if p.Type == PartToolStarted {
				marked[p.ToolCallID] = true
			}
		}
	}
	for _, c := range UnresolvedCalls(history) {
		d, ok := decided[c.ToolCallID]
		if !ok || !d.Decision.Approved {
			continue
		}
		if len(d.Args) > 0 {
			c.Args = d.Args
		}
		if marked[c.ToolCallID] {
			started = append(started, c)
		} else {
			notStarted = append(notStarted, c)
		}
	}
	return notStarted, started
}

// StartedMarks returns the parts that mark calls started (PartToolStarted).
func StartedMarks(calls []ToolCall) []Part {
	parts := make([]Part, len(calls))
	for i, c := range calls {
		parts[i] = Part{Type: PartToolStarted, ToolCallID: c.ToolCallID, ToolName: c.ToolName}
	}
	return parts
}
