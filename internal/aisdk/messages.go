package aisdk

import (
	"encoding/json"
	"strconv"

	"github.com/parleyhq/parley/internal/chat"
)

// Messages renders a chat's history as the UIMessage values useChat is
// seeded with: each user message as one, and everything that answered it
// (the steps' assistant and tool messages) as one assistant message with a
// step-start part per step and a dynamic-tool part per call, in the state
// the AI SDK gives it. clientTools are the chat's dynamic tools; pending
// are the calls the chat waits for (its required action).
//
// A running chat's turn in progress is left out: the resumed stream
// replays it from its start. Unless messages are queued behind it (queued,
// of a running chat): then the resumed stream carries the answer to the
// last of them, so they follow the history, each as a user message with
// the id QueuedID, and the turn in progress is shown as far as it is in
// the history.
func Messages(history []chat.Message, clientTools map[string]bool, pending []chat.ToolCall, running bool, queued []chat.QueuedMessage) []UIMessage {
	if !running {
		queued = nil // a queue waits behind a required action: the app answers it first
	}
	if running && len(queued) == 0 {
		for i := len(history) - 1; i >= 0; i-- {
			if history[i].Role == chat.RoleUser && !chat.IsRepair(history[i]) {
				history = history[:i+1]
				break
			}
		}
	}
	approvals := map[string]bool{}
	for _, c := range pending {
		if c.Kind == chat.ActionApproval {
			approvals[c.ToolCallID] = true
		}
	}
	out := []UIMessage{}
	var cur *UIMessage        // the assistant message being built
	calls := map[string]int{} // tool call id -> index in cur.Parts
	for _, q := range queued {
		history = append(history, chat.Message{ID: -q.ID, ChatID: q.ChatID, Role: chat.RoleUser, Parts: q.Parts})
	}
	for _, m := range history {
		switch m.Role {
		case chat.RoleUser:
			if chat.IsRepair(m) {
				continue // parley's request to repair a structured output: part of the answer
			}
			cur = nil
			u := UIMessage{ID: MessageID(m.ID), Role: "user", Parts: []UIPart{}}
			if m.ID < 0 {
				u.ID = QueuedID(-m.ID)
			}
			for _, p := range m.Parts {
				switch {
				case p.Type == chat.PartText:
					u.Parts = append(u.Parts, UIPart{Type: "text", Text: p.Text})
				case p.Type == chat.PartFile && p.FileID != "":
					u.Parts = append(u.Parts, UIPart{Type: "file", MediaType: p.MediaType, Filename: p.Name, URL: FileURL(m.ChatID, p.FileID)})
				}
			}
			out = append(out, u)
		case chat.RoleAssistant:
			if cur == nil {
				out = append(out, UIMessage{ID: MessageID(m.ID), Role: "assistant"})
				cur = &out[len(out)-1]
				clear(calls)
			}
			cur.Parts = append(cur.Parts, UIPart{Type: "step-start"})
			for _, p := range m.Parts {
				switch p.Type {
				case "text", "reasoning":
					cur.Parts = append(cur.Parts, UIPart{Type: p.Type, Text: p.Text, State: "done"})
				case "tool-call":
					part := UIPart{Type: "dynamic-tool", ToolCallID: p.ToolCallID, ToolName: p.ToolName,
						State: "input-available", Input: rawOr(p.Args, "{}"), ProviderExecuted: !clientTools[p.ToolName]}
					if approvals[p.ToolCallID] {
						part.State = "approval-requested"
						part.Approval = &Approval{ID: p.ToolCallID}
					}
					calls[p.ToolCallID] = len(cur.Parts)
					cur.Parts = append(cur.Parts, part)
				}
			}
		case chat.RoleTool:
			if cur == nil {
				continue
			}
			for _, p := range m.Parts {
				i, ok := calls[p.ToolCallID]
				if !ok {
					continue
				}
				part := &cur.Parts[i]
				switch {
				case p.Type == "tool-decision" && p.Decision != nil:
					approved := p.Decision.Approved
					part.Approval = &Approval{ID: p.ToolCallID, Approved: &approved, Reason: p.Decision.Reason}
					part.State = "approval-responded"
					if !approved {
						part.State = "output-denied"
					}
				case p.Type == "tool-result" && part.State != "output-denied":
					if p.IsError {
						part.State, part.ErrorText = "output-error", errorText(p.Output)
					} else {
						part.State, part.Output = "output-available", rawOr(p.Output, "null")
					}
				}
			}
		}
	}
	return out
}

// QueuedID is the UIMessage id of a parley queued message.
func QueuedID(id int64) string { return "queued-" + strconv.FormatInt(id, 10) }

// MarshalJSON writes an absent parts list as [] (the SDK iterates it).
func (m UIMessage) MarshalJSON() ([]byte, error) {
	type plain UIMessage
	if m.Parts == nil {
		m.Parts = []UIPart{}
	}
	return json.Marshal(plain(m))
}
