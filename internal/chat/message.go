package chat

import (
	"encoding/json"
	"time"
)

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one durable entry of a chat's history. IDs increase within a
// chat, so "after=<id>" resumes reading.
type Message struct {
	ID        int64     `json:"id"`
	ChatID    string    `json:"chat_id"`
	Role      Role      `json:"role"`
	Parts     []Part    `json:"parts"`
	Usage     *Usage    `json:"usage,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Superseded marks a message an edit or a regeneration replaced: it is
	// kept, but the model no longer sees it, and reads leave it out unless
	// asked for it.
	Superseded bool `json:"superseded,omitempty"`
	// ParentID is set on a superseded message: the message it followed
	// when it was written (0: none, it was the chat's first). A message of
	// the history follows the one before it, compactions aside. Messages
	// with the same parent are versions of one another.
	ParentID *int64 `json:"parent_id,omitempty"`
}

// Part types.
const (
	PartText       = "text"
	PartReasoning  = "reasoning"
	PartToolCall   = "tool-call"
	PartToolResult = "tool-result"
	// PartToolDecision records a person's decision on a call that needed
	// approval; it stands in a tool message before the call's result, and
	// the model never sees it (the result says what came of it).
	PartToolDecision = "tool-decision"
	// PartToolStarted marks an approved call as started: the run writes it
	// before the call runs, after the call's decision and before its
	// result, so a worker that takes over after a crash knows whether the
	// call may have run (it answers it "outcome unknown") or never started
	// (it runs it). The model never sees it.
	PartToolStarted = "tool-started"
	// PartCompaction holds the summary of the conversation up to its
	// ThroughMessageID: the model sees the summary in place of those
	// messages (ForModel). It is the only part of its message, an
	// assistant message that carries the summarising call's usage.
	PartCompaction = "compaction"
	// PartFile is a file the person attached (an image, a PDF, a text
	// file): FileID names the owner's stored file, with its MediaType and
	// Name; URL instead names an image on the web that the provider fetches
	// (parley never does).
	PartFile = "file"
	// PartOutput is a turn's structured output: the final answer's JSON,
	// valid against the turn's format, in the assistant message beside the
	// text it was read from. The model never sees it (the text says the
	// same).
	PartOutput = "output"
)

// Where a compaction came from (Part.Source).
const (
	CompactAuto     = "auto"     // the chat neared its model's context window
	CompactManual   = "manual"   // a person asked (POST /compact)
	CompactOverflow = "overflow" // the provider said the context was too long
)

// Part is one piece of a message: text, reasoning, a tool call or a tool result.
type Part struct {
	Type       string          `json:"type"`
	Text       string          `json:"text,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
	// OutputBytes and Truncated are set on a tool result whose output was
	// cut (CapOutput): the full length of its text, in bytes.
	OutputBytes int64     `json:"output_bytes,omitempty"`
	Truncated   bool      `json:"truncated,omitempty"`
	Decision    *Decision `json:"decision,omitempty"` // tool-decision; Args then holds edited args, if any

	// A compaction's fields: its summary, why it was made (CompactAuto,
	// CompactManual, CompactOverflow), the context's estimated tokens
	// before it and the window it was measured against (0: unknown), and
	// the last message it summarises.
	Summary          string `json:"summary,omitempty"`
	Source           string `json:"source,omitempty"`
	TokensBefore     int64  `json:"tokens_before,omitempty"`
	ContextWindow    int64  `json:"context_window,omitempty"`
	ThroughMessageID int64  `json:"through_message_id,omitempty"`

	// A file part's fields (PartFile). Data holds the file's bytes while a
	// model call is built; it is never stored or sent to API clients.
	FileID    string `json:"file_id,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Name      string `json:"name,omitempty"`
	URL       string `json:"url,omitempty"`
	Data      []byte `json:"-"`

	// JSON is a PartOutput's value.
	JSON json.RawMessage `json:"json,omitempty"`
}

// Decision is who decided what of a call that needed approval.
type Decision struct {
	Approved  bool      `json:"approved"`
	Reason    string    `json:"reason,omitempty"`
	DecidedBy string    `json:"decided_by"` // the owner
	Token     string    `json:"token"`      // the name of the token that decided
	DecidedAt time.Time `json:"decided_at"`
}

// MarshalJSON writes exactly the fields of the part's type, so a tool result
// always carries "is_error" and "output" ("output_bytes" and "truncated" only
// when it was cut), and a text part nothing but its text.
func (p Part) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case PartToolCall:
		args := p.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		return json.Marshal(struct {
			Type       string          `json:"type"`
			ToolCallID string          `json:"tool_call_id"`
			ToolName   string          `json:"tool_name"`
			Args       json.RawMessage `json:"args"`
		}{p.Type, p.ToolCallID, p.ToolName, args})
	case PartToolResult:
		out := p.Output
		if len(out) == 0 {
			out = json.RawMessage("null")
		}
		return json.Marshal(struct {
			Type        string          `json:"type"`
			ToolCallID  string          `json:"tool_call_id"`
			ToolName    string          `json:"tool_name"`
			Output      json.RawMessage `json:"output"`
			IsError     bool            `json:"is_error"`
			OutputBytes int64           `json:"output_bytes,omitempty"`
			Truncated   bool            `json:"truncated,omitempty"`
		}{p.Type, p.ToolCallID, p.ToolName, out, p.IsError, p.OutputBytes, p.Truncated})
	case PartToolDecision:
		d := Decision{}
		if p.Decision != nil {
			d = *p.Decision
		}
		return json.Marshal(struct {
			Type       string          `json:"type"`
			ToolCallID string          `json:"tool_call_id"`
			ToolName   string          `json:"tool_name"`
			Args       json.RawMessage `json:"args,omitempty"`
			Decision   Decision        `json:"decision"`
		}{p.Type, p.ToolCallID, p.ToolName, p.Args, d})
	case PartToolStarted:
		return json.Marshal(struct {
			Type       string `json:"type"`
			ToolCallID string `json:"tool_call_id"`
			ToolName   string `json:"tool_name"`
		}{p.Type, p.ToolCallID, p.ToolName})
	case PartCompaction:
		return json.Marshal(struct {
			Type             string `json:"type"`
			Summary          string `json:"summary"`
			Source           string `json:"source"`
			TokensBefore     int64  `json:"tokens_before"`
			ContextWindow    int64  `json:"context_window"`
			ThroughMessageID int64  `json:"through_message_id"`
		}{p.Type, p.Summary, p.Source, p.TokensBefore, p.ContextWindow, p.ThroughMessageID})
	case PartFile:
		return json.Marshal(struct {
			Type      string `json:"type"`
			FileID    string `json:"file_id,omitempty"`
			MediaType string `json:"media_type,omitempty"`
			Name      string `json:"name,omitempty"`
			URL       string `json:"url,omitempty"`
		}{p.Type, p.FileID, p.MediaType, p.Name, p.URL})
	case PartOutput:
		return json.Marshal(struct {
			Type string          `json:"type"`
			JSON json.RawMessage `json:"json"`
		}{p.Type, p.JSON})
	default:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	}
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Type: PartText, Text: s} }

// UnresolvedCalls returns the tool calls of the last assistant message in
// history that have no result after it, in call order. The history is a
// chat's messages in id order.
func UnresolvedCalls(history []Message) []ToolCall {
	last := -1
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == RoleAssistant && !IsCompaction(history[i]) {
			last = i
			break
		}
	}
	if last < 0 {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range history[last+1:] {
		for _, p := range m.Parts {
			if p.Type == PartToolResult {
				answered[p.ToolCallID] = true
			}
		}
	}
	var calls []ToolCall
	for _, p := range history[last].Parts {
		if p.Type == PartToolCall && !answered[p.ToolCallID] {
			calls = append(calls, ToolCall{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Args: p.Args})
		}
	}
	return calls
}

// SyntheticResults answers each call with an error result carrying reason, so
// no tool call is left dangling when a run is cut short.
func SyntheticResults(calls []ToolCall, reason string) []Part {
	out, _ := json.Marshal(reason)
	parts := make([]Part, len(calls))
	for i, c := range calls {
		parts[i] = Part{Type: PartToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Output: out, IsError: true}
	}
	return parts
}
