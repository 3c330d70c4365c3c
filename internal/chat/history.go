package chat

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ForModel returns history as a model should see it: the newest
// compaction's summary (SummaryMessage) in place of the messages it
// summarises, then the messages after them, in which every assistant message
// that makes tool calls is followed by exactly one tool message with one
// result per call, in call order, and tool messages stand nowhere else.
//
// A call's result is looked for in every tool message between its assistant
// message and the next one, so a result written after a later user message
// is moved back to its call; a call without a result gets an error result
// (ReasonNoResult); a second result of a call, or a result of no call of
// that assistant message, is dropped. A call whose arguments a person
// edited before approving it shows the edited arguments. history is not
// modified.
func ForModel(history []Message) []Message {
	summary, live := SplitAtSummary(history)
	out := make([]Message, 0, len(live)+1)
	if summary != nil {
		out = append(out, SummaryMessage(*summary, history[0].ChatID))
	}
	return forModel(live, out)
}

// forModel appends history, with no compaction in it, to out as ForModel
// says.
func forModel(history []Message, out []Message) []Message {
	for i := 0; i < len(history); i++ {
		m := history[i]
		if m.Role == RoleTool {
			continue // placed after its assistant message, or dropped
		}
		calls := CallsOf(m)
		if m.Role != RoleAssistant || len(calls) == 0 {
			out = append(out, forModelParts(m))
			continue
		}
		end := i + 1
		for end < len(history) && history[end].Role != RoleAssistant {
			end++
		}
		out = append(out, withEditedArgs(m, Decisions(history[:end])))
		found := make(map[string]Part, len(calls))
		merged := Message{ChatID: m.ChatID, Role: RoleTool}
		for _, t := range history[i+1 : end] {
			if t.Role != RoleTool {
				continue
			}
			if merged.ID == 0 {
				merged.ID, merged.CreatedAt = t.ID, t.CreatedAt
			}
			for _, p := range t.Parts {
				if _, dup := found[p.ToolCallID]; p.Type == PartToolResult && !dup {
					found[p.ToolCallID] = p
				}
			}
		}
		reason, _ := json.Marshal(ReasonNoResult)
		for _, c := range calls {
			p, ok := found[c.ToolCallID]
			if !ok {
				p = Part{Type: PartToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Output: reason, IsError: true}
			}
			merged.Parts = append(merged.Parts, p)
		}
		out = append(out, merged)
	}
	return out
}

// withEditedArgs returns m with the arguments a person edited before
// approving (decisions) in place of the model's, so the model reads the
// call that ran beside its result. m is not modified.
func withEditedArgs(m Message, decisions map[string]Part) Message {
	edited := false
	for _, p := range m.Parts {
		if d, ok := decisions[p.ToolCallID]; ok && p.Type == PartToolCall && len(d.Args) > 0 {
			edited = true
		}
	}
	if !edited {
		return m
	}
	parts := make([]Part, len(m.Parts))
	for i, p := range m.Parts {
		if d, ok := decisions[p.ToolCallID]; ok && p.Type == PartToolCall && len(d.Args) > 0 {
			p.Args = d.Args
		}
		parts[i] = p
	}
	m.Parts = parts
	return m
}

// CallsOf lists the tool calls of a message, in call order.
func CallsOf(m Message) []ToolCall {
	var calls []ToolCall
	for _, p := range m.Parts {
		if p.Type == PartToolCall {
			calls = append(calls, ToolCall{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Args: p.Args})
		}
	}
	return calls
}

// CheckHistory checks the invariant every persisted history keeps: every
// tool call has exactly one result, in the tool messages right after its
// assistant message (each of them holds its results in call order), call
// ids are unique among the messages a model sees at once (those after the
// newest compaction's cut at any point), and no tool message stands
// anywhere else; a compaction cuts at no step and stands where no call is
// open. A call may
// also have one decision (a person's, on a call that needed approval), in
// those tool messages before its result, and then one started mark. Only calls of the last assistant
// message may be open, and only while the chat is in requires_action or
// pending and mayWait says the call may be (it waits for a client's result
// or a person's decision, or a person approved it and it runs when the chat
// does); a chat in requires_action waits for at least one call. It returns
// every breach found, joined.
func CheckHistory(status Status, history []Message, mayWait func(ToolCall) bool) error {
	var errs []error
	seen := map[string]bool{}
	var (
		calls     []ToolCall     // of the last assistant message
		index     map[string]int // call id -> position in calls
		answered  map[string]bool
		decided   map[string]bool // calls with a person's decision
		started   map[string]bool // approved calls marked started
		afterAsst bool            // only tool messages since the last assistant message
	)
	unanswered := func() []ToolCall {
		var open []ToolCall
		for _, c := range calls {
			if !answered[c.ToolCallID] {
				open = append(open, c)
			}
		}
		return open
	}
	for k, m := range history {
		if IsCompaction(m) {
			// The model sees only the calls after its cut from here on.
			through := m.Parts[0].ThroughMessageID
			if through >= m.ID {
				errs = append(errs, fmt.Errorf("compaction %d summarises through message %d, after itself", m.ID, through))
			}
			for i, h := range history[:k] {
				if h.ID == through && SplitsStep(history[:k], i) {
					errs = append(errs, fmt.Errorf("compaction %d cuts after message %d, between a call and its result", m.ID, through))
				}
			}
			seen = map[string]bool{}
			for _, h := range history[:k] {
				for _, c := range CallsOf(h) {
					if h.ID > through {
						seen[c.ToolCallID] = true
					}
				}
			}
		}
		if m.Role != RoleTool {
			for _, c := range unanswered() {
				errs = append(errs, fmt.Errorf("call %s (%s) has no result before message %d", c.ToolCallID, c.ToolName, m.ID))
			}
			calls, index, answered, decided, started, afterAsst = nil, map[string]int{}, map[string]bool{}, map[string]bool{}, map[string]bool{}, m.Role == RoleAssistant
			if m.Role == RoleAssistant {
				calls = CallsOf(m)
				for i, c := range calls {
					if seen[c.ToolCallID] {
						errs = append(errs, fmt.Errorf("message %d: call id %s used before", m.ID, c.ToolCallID))
					}
					seen[c.ToolCallID] = true
					index[c.ToolCallID] = i
				}
			}
			continue
		}
		if !afterAsst {
			errs = append(errs, fmt.Errorf("tool message %d does not follow an assistant message", m.ID))
			continue
		}
		last := -1
		for _, p := range m.Parts {
			if p.Type == PartToolStarted {
				switch {
				case !decided[p.ToolCallID]:
					errs = append(errs, fmt.Errorf("tool message %d: %s marked started without a decision before it", m.ID, p.ToolCallID))
				case answered[p.ToolCallID] || started[p.ToolCallID]:
					errs = append(errs, fmt.Errorf("tool message %d: %s marked started after its result or twice", m.ID, p.ToolCallID))
				}
				started[p.ToolCallID] = true
				continue
			}
			if p.Type == PartToolDecision {
				_, ok := index[p.ToolCallID]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("tool message %d: decision on %s, which its assistant message did not call", m.ID, p.ToolCallID))
				case answered[p.ToolCallID] || decided[p.ToolCallID]:
					errs = append(errs, fmt.Errorf("tool message %d: decision on %s after its result or another decision", m.ID, p.ToolCallID))
				case p.Decision == nil:
					errs = append(errs, fmt.Errorf("tool message %d: decision part on %s without a decision", m.ID, p.ToolCallID))
				}
				decided[p.ToolCallID] = true
				continue
			}
			if p.Type != PartToolResult {
				errs = append(errs, fmt.Errorf("tool message %d holds a %s part", m.ID, p.Type))
				continue
			}
			i, ok := index[p.ToolCallID]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("tool message %d: result for %s, which its assistant message did not call", m.ID, p.ToolCallID))
			case answered[p.ToolCallID]:
				errs = append(errs, fmt.Errorf("tool message %d: a second result for %s", m.ID, p.ToolCallID))
			case i < last:
				errs = append(errs, fmt.Errorf("tool message %d: result for %s out of call order", m.ID, p.ToolCallID))
			}
			if ok {
				answered[p.ToolCallID] = true
				last = max(last, i)
			}
		}
	}
	open := unanswered()
	for _, c := range open {
		if (status != RequiresAction && status != Pending) || mayWait == nil || !mayWait(c) {
			errs = append(errs, fmt.Errorf("call %s (%s) is open in a %s chat", c.ToolCallID, c.ToolName, status))
		}
	}
	if status == RequiresAction && len(open) == 0 {
		errs = append(errs, errors.New("requires_action with no open call"))
	}
	return errors.Join(errs...)
}
