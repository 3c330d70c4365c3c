package chat

import (
	"bytes"
	"encoding/json"
	"time"
)

// Chat is one conversation with a model. Its JSON form is the API's Chat
// object (docs/api.md); the lease fields are the engine's and stay out of
// it.
type Chat struct {
	ID             string          `json:"id"`
	Owner          string          `json:"owner"`
	Title          string          `json:"title"`
	Model          string          `json:"model"`
	SystemPrompt   string          `json:"system_prompt,omitempty"`
	Status         Status          `json:"status"`
	RequiredAction *RequiredAction `json:"required_action"`
	DynamicTools   []DynamicTool   `json:"dynamic_tools"`
	Tools          ToolGlobs       `json:"tools"` // the server-side tools offered (ToolGlobs.Selects)
	// Approve names server-side tools whose calls wait for a person's
	// decision in this chat, on top of those the server's policy requires.
	Approve ToolGlobs `json:"approve"`
	// Agent and AgentVersion name the stored agent the chat was made from
	// and the version of it the chat runs (empty and 0: none). The chat's
	// own fields hold the values it really runs with.
	Agent        string `json:"agent,omitempty"`
	AgentVersion int    `json:"agent_version,omitempty"`
	// ResponseFormat asks each turn's final answer as JSON valid against a
	// schema, unless the message that started the turn asked for its own;
	// nil: free text.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	// TurnFormat is the format the user message that started the turn in
	// progress asked for (a {"type": "text"} one: free text); nil: the
	// chat's own (TurnOutput).
	TurnFormat *ResponseFormat `json:"-"`
	// OutputRepairs counts the repair requests made in the turn in
	// progress (PartOutputRepair); a user message that starts a turn, and
	// a run a person asks for (retry, edit, regenerate), start it over.
	OutputRepairs int `json:"-"`
	// Output is the last turn's structured output: the JSON of its
	// PartOutput, filled by reads that show one chat (not stored here).
	Output    json.RawMessage   `json:"output,omitempty"`
	Labels    map[string]string `json:"labels"`
	Archived  bool              `json:"archived"`
	LastError *ChatError        `json:"last_error"`
	Usage     Usage             `json:"usage"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	// Context is where the chat stands against its model's context window;
	// nil when the window is unknown (and in lists of chats).
	Context *Context `json:"context,omitempty"`
	// Version grows with every change of the chat that moves UpdatedAt, so
	// that of two copies of a chat (an event, a read) the newer is known.
	Version int64 `json:"version"`

	// ToolResultTimeout is this chat's requires_action deadline; zero means
	// the server's default.
	ToolResultTimeout time.Duration `json:"-"`
	// MaxSteps caps the model calls of each run of the chat below the
	// server's limit, as the agent version it was made from says; zero
	// means the server's limit.
	MaxSteps int `json:"-"`
	// ActionDeadline is when a requires_action chat stops waiting for results.
	ActionDeadline *time.Time `json:"-"`
	// WorkerID and LeaseGeneration identify the lease of a running chat; every
	// write of a worker is fenced by both.
	WorkerID        string     `json:"-"`
	LeaseGeneration int64      `json:"-"`
	LeaseExpiresAt  *time.Time `json:"-"`
	// InterruptRequested asks the worker running the chat to stop the step in
	// progress (a user message with busy "interrupt" arrived while it ran).
	InterruptRequested bool `json:"-"`
	// CompactRequested asks the chat's next run to compact its history and
	// end, answering nothing (POST /compact).
	CompactRequested bool `json:"-"`
	// LeaseRecoveries counts the times in a row the chat's lease expired
	// and was recovered (its worker died) since a worker last let go of it.
	LeaseRecoveries int `json:"-"`
}

// Context is the estimated size of a chat's next model request against its
// model's context window.
type Context struct {
	Tokens  int64   `json:"tokens"`
	Window  int64   `json:"window"`
	Percent float64 `json:"percent"` // 100 * Tokens / Window, to one decimal
}

// Usage counts tokens and cost; cost is in micro-units of the price's currency.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CostMicros   int64 `json:"cost_micros"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.InputTokens + o.InputTokens, u.OutputTokens + o.OutputTokens, u.CostMicros + o.CostMicros}
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

// DynamicTool is a tool declared by the API client, which also runs it.
// InputSchema (of an object) is what the model is offered; OutputSchema,
// optional and of any value, is what the client's results must satisfy
// (CheckOutput). The model never sees OutputSchema.
type DynamicTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// HasOutputSchema reports whether the tool declares an output_schema
// (absent and null declare none).
func (t DynamicTool) HasOutputSchema() bool {
	s := bytes.TrimSpace(t.OutputSchema)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}

// ToolCall is a call the model made, as the API shows a pending one.
type ToolCall struct {
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	Args       json.RawMessage `json:"args"`
	// In required_action: what answers the call (ActionClient or
	// ActionApproval), and for approvals the tool's source and description.
	Kind        string `json:"kind,omitempty"`
	Source      string `json:"source,omitempty"`
	Description string `json:"description,omitempty"`
}

// Kinds of pending action (ToolCall.Kind).
const (
	ActionClient   = "client"   // a dynamic tool: POST /tool-results
	ActionApproval = "approval" // a server-side call a person must decide on: POST /approvals
)

// RequiredAction is what a chat in requires_action waits for.
type RequiredAction struct {
	ToolCalls []ToolCall `json:"tool_calls"`
	Deadline  time.Time  `json:"deadline"`
}

// QueuedMessage is a user message that arrived while the chat was busy; it
// becomes a Message when the run ends, in arrival order.
type QueuedMessage struct {
	ID     int64  `json:"id"`
	ChatID string `json:"chat_id"`
	Parts  []Part `json:"parts"`
	// ResponseFormat is the format the message asked for its turn; nil:
	// the chat's.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
}
