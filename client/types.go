package client

import (
	"encoding/json"
	"strconv"
	"time"
)

// Chat statuses (the state machine of docs/architecture.md).
const (
	StatusWaiting        = "waiting"
	StatusPending        = "pending"
	StatusRunning        = "running"
	StatusRequiresAction = "requires_action"
	StatusError          = "error"
)

// Chat is one conversation with a model, as the API shows it.
type Chat struct {
	ID             string          `json:"id"`
	Owner          string          `json:"owner"`
	Title          string          `json:"title"`
	Model          string          `json:"model"`
	SystemPrompt   string          `json:"system_prompt,omitempty"`
	Status         string          `json:"status"`
	RequiredAction *RequiredAction `json:"required_action"`
	DynamicTools   []DynamicTool   `json:"dynamic_tools"`
	Tools          []string        `json:"tools"`   // globs selecting the server-side tools offered; nil: every one
	Approve        []string        `json:"approve"` // globs of server-side tools whose calls wait for a decision, besides the server's policy; nil: none added
	// Agent and AgentVersion name the agent version the chat was made
	// from ("" and 0: none).
	Agent        string            `json:"agent,omitempty"`
	AgentVersion int               `json:"agent_version,omitempty"`
	Labels       map[string]string `json:"labels"`
	Archived     bool              `json:"archived"`
	LastError    *ChatError        `json:"last_error"`
	Usage        Usage             `json:"usage"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	// Context is where the chat stands against its model's context window;
	// nil when the window is unknown, and in lists of chats.
	Context *ChatContext `json:"context,omitempty"`
	// Version grows with every change of the chat; of two copies of a chat,
	// the one with the greater Version is the newer.
	Version int64 `json:"version"`
	// ResponseFormat asks each turn's final answer as JSON valid against a
	// schema (structured output); nil: free text.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// Output is the structured output of the chat's last turn; nil when
	// it has none (and in lists of chats).
	Output json.RawMessage `json:"output,omitempty"`
	// Warnings are set by CreateChat only: what the server noticed about
	// the request without refusing it, like a glob of Tools that matches no
	// server-side tool now.
	Warnings []string `json:"warnings,omitempty"`
}

// ChatContext is the estimated size of a chat's next model request against
// its model's context window, in tokens.
type ChatContext struct {
	Tokens  int64   `json:"tokens"`
	Window  int64   `json:"window"`
	Percent float64 `json:"percent"` // 100 * Tokens / Window, to one decimal
}

// RequiredAction is what a chat in requires_action waits for, before
// Deadline: the results of its open dynamic tool calls (Kind ActionClient,
// answered with SubmitToolResults) and the decisions on its server-side
// calls that need approval (Kind ActionApproval, answered with Decide).
type RequiredAction struct {
	ToolCalls []ToolCall `json:"tool_calls"`
	Deadline  time.Time  `json:"deadline"`
}

// Kinds of pending call (ToolCall.Kind).
const (
	// ActionClient is a call of a dynamic tool: the client runs it and
	// posts its result (SubmitToolResults).
	ActionClient = "client"
	// ActionApproval is a call of a server-side tool that waits for a
	// person's decision (Decide): approved, it runs on the server; denied,
	// the model gets an error result.
	ActionApproval = "approval"
)

// ToolCall is a call the chat waits on: of a dynamic tool the client must
// answer, or of a server-side tool that needs approval.
type ToolCall struct {
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	Args       json.RawMessage `json:"args"`
	// Kind is ActionClient or ActionApproval; a server that predates
	// approvals leaves it empty, which means ActionClient.
	Kind string `json:"kind,omitempty"`
	// Source and Description are those of the server-side tool, for an
	// approval.
	Source      string `json:"source,omitempty"`
	Description string `json:"description,omitempty"`
}

// NeedsApproval reports whether the call waits for a decision (Decide)
// rather than a result (SubmitToolResults).
func (c ToolCall) NeedsApproval() bool { return c.Kind == ActionApproval }

// DynamicTool declares a tool the client runs itself. InputSchema is a JSON
// Schema of an object: the model's arguments. OutputSchema, optional, is a
// JSON Schema of any value: the server refuses a result whose output fails
// it (an APIError with code "invalid_output"; error results are not
// checked), and the web UI builds its answer form from it. The model does
// not see it.
type DynamicTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Usage counts tokens and cost (in micro-units of the price's currency).
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CostMicros   int64 `json:"cost_micros"`
}

// ChatError is why the last run of a chat failed.
type ChatError struct {
	Kind       string `json:"kind"`
	Message    string `json:"message"`
	Provider   string `json:"provider,omitempty"`
	Source     string `json:"source,omitempty"`
	HTTPStatus int    `json:"http_status,omitempty"`
	Retryable  bool   `json:"retryable"`
}

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one durable entry of a chat's history; ids increase within a
// chat.
type Message struct {
	ID        int64     `json:"id"`
	ChatID    string    `json:"chat_id"`
	Role      string    `json:"role"`
	Parts     []Part    `json:"parts"`
	Usage     *Usage    `json:"usage,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Superseded marks a message an edit or a regeneration replaced: the
	// model no longer sees it, and reads leave it out unless asked for it
	// (IncludeSuperseded).
	Superseded bool `json:"superseded,omitempty"`
	// ParentID is set on a superseded message: the message it followed
	// (0: none). A message of the history follows the one before it,
	// compactions aside; messages with the same parent are versions of one
	// another (MessageVersions).
	ParentID *int64 `json:"parent_id,omitempty"`
}

// Text joins the message's text parts.
func (m Message) Text() string {
	var s string
	for _, p := range m.Parts {
		if p.Type == PartText {
			s += p.Text
		}
	}
	return s
}

// IsRepair reports whether m is a user message the server wrote, not a
// person: a request to repair an answer that was not valid against the
// turn's response format (PartOutputRepair).
func (m Message) IsRepair() bool {
	return m.Role == RoleUser && len(m.Parts) > 0 && m.Parts[0].Type == PartOutputRepair
}

// Part types of a Message.
const (
	PartText       = "text"
	PartReasoning  = "reasoning"
	PartToolCall   = "tool-call"
	PartToolResult = "tool-result"
	// PartToolDecision records the decision on a call that needed
	// approval; it stands in a tool message before the call's result. The
	// model does not see it: it sees the result.
	PartToolDecision = "tool-decision"
	// PartToolStarted marks an approved call as started, after its
	// decision and before its result; the model does not see it either.
	PartToolStarted = "tool-started"
	// PartCompaction is the only part of an assistant message that
	// summarises the conversation up to its ThroughMessageID: the model sees
	// the summary in place of those messages, which stay in the history.
	PartCompaction = "compaction"
	// PartFile is a file attached to a user message (an image, a PDF, a
	// text file): FileID names the uploaded file (UploadFile), MediaType
	// and Name are what the server found when it was stored. Send one with
	// FilePart.
	PartFile = "file"
	// PartOutput is a turn's structured output: JSON holds the final
	// answer's value, valid against the turn's response format, beside
	// the text it was read from.
	PartOutput = "output"
	// PartOutputRepair is the only part of a user message the server
	// wrote, not a person: Text asks the model to answer again in the
	// turn's response format, quoting what was wrong.
	PartOutputRepair = "output-repair"
)

// ResponseFormat asks for answers as JSON valid against a schema, in
// OpenAI's shape: {"type": "json_schema", "json_schema": {...}}, or
// {"type": "text"} for free text. JSONSchemaFormat makes one.
type ResponseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *JSONSchemaFormat `json:"json_schema,omitempty"`
}

// JSONSchemaFormat is a response format's name (letters, digits, '_' and
// '-'; "output" when empty), its schema (of an object, at most 64 KiB, no
// remote $ref) and whether the provider should constrain the answer to it.
type JSONSchemaFormat struct {
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
}

// JSONSchema returns the response format that asks for JSON valid against
// schema.
func JSONSchema(name string, schema json.RawMessage, strict bool) *ResponseFormat {
	return &ResponseFormat{Type: "json_schema", JSONSchema: &JSONSchemaFormat{Name: name, Schema: schema, Strict: strict}}
}

// TextFormat is the response format of free text: on a message, it turns
// the chat's format off for that message's turn.
var TextFormat = &ResponseFormat{Type: "text"}

// Why a compaction was made (Part.Source of a PartCompaction).
const (
	CompactAuto     = "auto"     // the chat neared its model's context window
	CompactManual   = "manual"   // someone asked (Compact)
	CompactOverflow = "overflow" // the provider said the context was too long
)

// Part is one piece of a message: text, reasoning, a tool call, a tool
// result, a decision on a call, a compaction or an attached file; the
// fields of its Type are set.
type Part struct {
	Type       string          `json:"type"`
	Text       string          `json:"text,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"` // of a tool-decision: the edited arguments, if any
	Output     json.RawMessage `json:"output,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
	Decision   *ToolDecision   `json:"decision,omitempty"` // tool-decision

	// A compaction's fields: its summary, why it was made (CompactAuto,
	// CompactManual or CompactOverflow), the context's estimated tokens
	// before it and the window they were measured against (0: unknown),
	// and the id of the last message it summarises.
	Summary          string `json:"summary,omitempty"`
	Source           string `json:"source,omitempty"`
	TokensBefore     int64  `json:"tokens_before,omitempty"`
	ContextWindow    int64  `json:"context_window,omitempty"`
	ThroughMessageID int64  `json:"through_message_id,omitempty"`

	// A file part's fields (PartFile).
	FileID    string `json:"file_id,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Name      string `json:"name,omitempty"`

	// JSON is a PartOutput's value.
	JSON json.RawMessage `json:"json,omitempty"`
}

// ToolDecision is who decided what on a call that needed approval, as the
// history keeps it.
type ToolDecision struct {
	Approved  bool      `json:"approved"`
	Reason    string    `json:"reason,omitempty"`
	DecidedBy string    `json:"decided_by"` // the owner of the token that decided
	Token     string    `json:"token"`      // that token's name
	DecidedAt time.Time `json:"decided_at"`
}

// QueuedMessage is a user message that waits until the chat's run ends.
type QueuedMessage struct {
	ID     int64  `json:"id"`
	ChatID string `json:"chat_id"`
	Parts  []Part `json:"parts"`
	// ResponseFormat is the format the message asked for its turn.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
}

// Model is a model configured on the server.
type Model struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Default  bool   `json:"default"`
	// Inputs are the kinds of content the model takes: "text", "image",
	// "pdf".
	Inputs []string `json:"inputs"`
	// ContextWindow is the model's context window in tokens; nil when the
	// server does not know it.
	ContextWindow *int64 `json:"context_window"`
}

// Approval policies of server-side tools (Tool.Approval).
const (
	ApprovalNever       = "never"
	ApprovalAlways      = "always"
	ApprovalDestructive = "destructive" // unless the tool says it is read-only or not destructive
)

// Tool is a server-side tool; Source is "builtin" or the name of the source
// that owns it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Source      string          `json:"source"`
	// Approval is the tool's approval policy in the server's config
	// (ApprovalNever, ApprovalAlways or ApprovalDestructive), and
	// RequiresApproval whether its calls wait for a decision under it. A
	// chat may require approval of more tools (CreateChatRequest.Approve).
	Approval         string `json:"approval,omitempty"`
	RequiresApproval bool   `json:"requires_approval"`
}

// CreateChatRequest is the body of POST /api/v1/chats; every field is
// optional.
type CreateChatRequest struct {
	Model        string            `json:"model,omitempty"`
	SystemPrompt string            `json:"system_prompt,omitempty"`
	Title        string            `json:"title,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	// Message is the first user message: a string, or []Part of text and
	// file parts (TextPart, FilePart).
	Message      any           `json:"message,omitempty"`
	DynamicTools []DynamicTool `json:"dynamic_tools,omitempty"`
	// Tools narrows the server-side tools offered to the model to those one
	// of these globs matches ("weather_*", "github_search_issues"; the
	// syntax of path.Match). Nil offers every one; a non-nil empty slice
	// none. Dynamic tools are offered whatever it says.
	Tools []string `json:"-"`
	// Approve makes the calls of the server-side tools these globs match
	// wait for a decision (Decide) before they run, on top of those the
	// server's policy requires approval of; it cannot exempt a tool the
	// server requires approval of.
	Approve []string `json:"approve,omitempty"`
	// ToolResultTimeout is the requires_action deadline of the chat; zero
	// means the server's default.
	ToolResultTimeout time.Duration `json:"-"`
	// Agent names the agent the chat starts from: its current version
	// gives every field the request leaves out.
	Agent string `json:"agent,omitempty"`
	// ResponseFormat asks each turn's final answer as JSON valid against a
	// schema (JSONSchema); nil: free text.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
}

// MarshalJSON writes ToolResultTimeout as the API's Go duration string, and
// Tools when it is not nil (an empty one as []).
func (r CreateChatRequest) MarshalJSON() ([]byte, error) {
	type plain CreateChatRequest
	var timeout string
	if r.ToolResultTimeout > 0 {
		timeout = r.ToolResultTimeout.String()
	}
	var tools *[]string
	if r.Tools != nil {
		tools = &r.Tools
	}
	return json.Marshal(struct {
		plain
		Tools             *[]string `json:"tools,omitempty"`
		ToolResultTimeout string    `json:"tool_result_timeout,omitempty"`
	}{plain(r), tools, timeout})
}

// ChatPatch changes a chat; nil fields stay as they are. Labels replaces
// every label (an empty, non-nil map removes them).
type ChatPatch struct {
	Title    *string
	Labels   map[string]string
	Archived *bool
	// AgentVersion moves a chat made from an agent to another version of
	// it: "latest", or a version number ("3"); "" leaves it.
	AgentVersion string
}

// MarshalJSON writes the fields that are set; a non-nil empty Labels is {}.
func (p ChatPatch) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if p.Title != nil {
		m["title"] = *p.Title
	}
	if p.Labels != nil {
		m["labels"] = p.Labels
	}
	if p.Archived != nil {
		m["archived"] = *p.Archived
	}
	if v := p.AgentVersion; v != "" {
		m["agent_version"] = v
		if n, err := strconv.Atoi(v); err == nil {
			m["agent_version"] = n
		}
	}
	return json.Marshal(m)
}

// Archived filters of ListChatsOptions.
const (
	ArchivedExclude = ""     // the default: archived chats are hidden
	ArchivedOnly    = "true" // only archived chats
	ArchivedAny     = "any"  // both
)

// ListChatsOptions filters and pages GET /api/v1/chats.
type ListChatsOptions struct {
	Statuses []string          // any of them matches
	Labels   map[string]string // all of them must match
	Archived string            // ArchivedExclude, ArchivedOnly or ArchivedAny
	Limit    int               // 0: the server's default
	Cursor   string            // NextCursor of the previous page
}

// ChatPage is one page of chats; NextCursor is "" on the last page.
type ChatPage struct {
	Chats      []Chat `json:"chats"`
	NextCursor string `json:"next_cursor"`
}

// Busy modes: what a new message does to a chat with work in progress.
const (
	BusyQueue     = "queue"
	BusyInterrupt = "interrupt"
	BusyReject    = "reject"
)

// PostMessageRequest is the body of POST /api/v1/chats/{id}/messages.
type PostMessageRequest struct {
	// Content is a string, or []Part of text and file parts (TextPart,
	// FilePart). It is sent as
	// "message", the name POST /api/v1/chats uses too ("content" is the
	// older name of the field).
	Content any `json:"message"`
	// Busy is BusyQueue (the default when empty), BusyInterrupt or
	// BusyReject.
	Busy string `json:"busy,omitempty"`
	// ResponseFormat asks the final answer of this message's turn, and of
	// it only, in a format (TextFormat: free text); nil: the chat's.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
}

// PostMessageResult is where a posted message went: into the history
// (Message) or into the chat's queue (Queued). Exactly one is set.
type PostMessageResult struct {
	Message *Message       `json:"message,omitempty"`
	Queued  *QueuedMessage `json:"queued,omitempty"`
}

// ToolResult answers one dynamic tool call. Output is any JSON value (null
// when empty).
type ToolResult struct {
	ToolCallID string          `json:"tool_call_id"`
	Output     json.RawMessage `json:"output"`
	IsError    bool            `json:"is_error"`
}

// TextResult returns a successful result whose output is the JSON string s.
func TextResult(callID, s string) ToolResult {
	b, _ := json.Marshal(s) // a string always encodes
	return ToolResult{ToolCallID: callID, Output: b}
}

// ErrorResult returns an error result whose output is the JSON string msg.
func ErrorResult(callID, msg string) ToolResult {
	r := TextResult(callID, msg)
	r.IsError = true
	return r
}

// Decision decides on one call that needs approval (a ToolCall of Kind
// ActionApproval). Build one with Approve, ApproveWithArgs or Deny, and post
// the decisions on every pending approval of a chat together with Decide.
type Decision struct {
	ToolCallID string `json:"tool_call_id"`
	Approve    bool   `json:"approve"`
	// Args, when set, replaces the model's arguments of an approved call;
	// the server checks it against the tool's input schema.
	Args json.RawMessage `json:"args,omitempty"`
	// Reason says why; the model sees it when the call is denied
	// ("denied: REASON").
	Reason string `json:"reason,omitempty"`
}

// Approve returns a decision that lets the call run with the model's
// arguments.
func Approve(callID string) Decision { return Decision{ToolCallID: callID, Approve: true} }

// ApproveWithArgs returns a decision that lets the call run with args (a
// JSON object) in place of the model's arguments.
func ApproveWithArgs(callID string, args json.RawMessage) Decision {
	return Decision{ToolCallID: callID, Approve: true, Args: args}
}

// Deny returns a decision that refuses the call: it does not run, and the
// model gets the error result "denied: REASON" ("denied" when reason is
// empty).
func Deny(callID, reason string) Decision {
	return Decision{ToolCallID: callID, Reason: reason}
}
