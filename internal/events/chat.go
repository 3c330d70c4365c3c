package events

import (
	"encoding/json"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// Chat stream event kinds (GET /api/v1/chats/{id}/stream, docs/api.md).
const (
	KindStatus  = "status"
	KindMessage = "message"
	KindPart    = "part"
	KindRetry   = "retry"
	KindError   = "error"
	// KindToolProgress carries a progress report of a server-side tool call
	// in flight; streams send it as a part event of type tool-progress.
	KindToolProgress = "tool-progress"
	// KindSnapshot answers a snapshot request on a chat's control topic with
	// the parts already streamed of the step in progress. Internal: stream
	// handlers turn it into part events for the subscriber that asked.
	KindSnapshot = "snapshot"
	// KindHistory says the history was rewritten: the messages after
	// SupersededAfter were superseded. What replaces them (an edit's new
	// version, the new answer) follows as message events.
	KindHistory = "history"
)

// Delta part types of part events.
const (
	DeltaText          = "text-delta"
	DeltaReasoning     = "reasoning-delta"
	DeltaToolCallStart = "tool-call-start"
	DeltaToolCallDelta = "tool-call-delta"
)

// Delta is one streamed piece of the assistant message in progress.
type Delta struct {
	Type       string `json:"type"`
	Text       string `json:"text,omitempty"`         // text, reasoning and argument deltas
	Index      int    `json:"index"`                  // tool calls: position in this answer
	ToolCallID string `json:"tool_call_id,omitempty"` // tool-call-start
	ToolName   string `json:"tool_name,omitempty"`    // tool-call-start
}

// PartBatch is a run of consecutive deltas of one step, as published on a
// chat's topic: deltas Seq, Seq+1, ... of the message MessageID (its id is
// reserved when the step starts, so part events and the durable message
// agree).
type PartBatch struct {
	MessageID int64   `json:"message_id"`
	Seq       int     `json:"seq"`
	Deltas    []Delta `json:"deltas"`
}

// RetryInfo is the payload of a retry event.
type RetryInfo struct {
	Attempt int    `json:"attempt"`
	DelayMS int64  `json:"delay_ms"`
	Error   string `json:"error"`
}

// ToolProgress is a progress report of a tool call in flight, as the part
// of a part event (type "tool-progress"). It is not kept: the call's result
// is what the history holds.
type ToolProgress struct {
	Type       string  `json:"type"`                 // always "tool-progress"
	MessageID  int64   `json:"message_id,omitempty"` // the assistant message that made the call; streams send it beside the part
	ToolCallID string  `json:"tool_call_id"`
	ToolName   string  `json:"tool_name"`
	Progress   float64 `json:"progress"`
	Total      float64 `json:"total,omitempty"` // 0 when unknown
	Message    string  `json:"message,omitempty"`
}

// ChatEvent is one event on a chat's topic. Exactly the fields of its Kind
// are set.
type ChatEvent struct {
	Kind      string          `json:"kind"`
	Chat      *chat.Chat      `json:"chat,omitempty"`       // status
	Message   *chat.Message   `json:"message,omitempty"`    // message
	Parts     *PartBatch      `json:"parts,omitempty"`      // part, snapshot
	ToolCalls []chat.ToolCall `json:"tool_calls,omitempty"` // action_required
	Deadline  *time.Time      `json:"deadline,omitempty"`   // action_required
	Retry     *RetryInfo      `json:"retry,omitempty"`      // retry
	Progress  *ToolProgress   `json:"progress,omitempty"`   // tool-progress
	Error     *chat.ChatError `json:"error,omitempty"`      // error
	Nonce     string          `json:"nonce,omitempty"`      // snapshot: the request it answers
	// history: the messages after this id are superseded.
	SupersededAfter int64 `json:"superseded_after,omitempty"`
}

// ControlTopic carries requests to whichever worker runs a chat: interrupt,
// snapshot requests.
func ControlTopic(chatID string) string { return "control." + chatID }

// Control messages.
const (
	ControlInterrupt = "interrupt"
	ControlSnapshot  = "snapshot"
)

// Control is a message on a chat's control topic.
type Control struct {
	Kind  string `json:"kind"`
	Nonce string `json:"nonce,omitempty"` // snapshot: echoed in the answer
}

// Encode marshals an event; the types here always encode.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("events: encode: " + err.Error())
	}
	return b
}
