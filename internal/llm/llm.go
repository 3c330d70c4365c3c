// Package llm is parley's small streaming interface to language models.
// Implementations (openai/, anthropic/, echo/) sit on the official SDKs;
// llmtest/ holds fake servers that speak each provider's real wire format.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// Provider makes one streaming model call. It calls emit for each delta as it
// arrives and returns the whole answer when the stream ends. If emit returns
// an error, the call stops and returns it. Implementations are safe for
// concurrent use.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Event) error) (Result, error)
}

// Request is one model call.
type Request struct {
	Model           string         // the provider's model id
	System          string         // system prompt; "" for none
	Messages        []chat.Message // the history, oldest first: user, assistant and tool messages
	Tools           []ToolDef      // every tool the model may call
	MaxOutputTokens int            // 0: the provider's default
	// Format asks the final answer as JSON valid against a schema
	// (structured output); nil: free text. A provider passes it on as its
	// API takes one, or says it in the system prompt (FormatInstruction);
	// parley checks the answer either way.
	Format *chat.OutputFormat
}

// FormatInstruction is what a provider without a native structured
// output adds to the system prompt for f.
func FormatInstruction(f chat.OutputFormat) string {
	return fmt.Sprintf("Your final answer (the one that calls no tool) must be a single JSON value, "+
		"with no prose and no code fence around it, valid against this JSON Schema (%q):\n%s", f.Name, f.Schema)
}

// EstimateTokens estimates the request's input tokens as parley counts
// context (chat.EstimateText): its system prompt, messages and tools'
// definitions.
func (r Request) EstimateTokens() int64 {
	n := chat.EstimateText(r.System) + chat.EstimateTokens(r.Messages)
	for _, d := range r.Tools {
		n += chat.EstimateText(d.Name) + chat.EstimateText(d.Description) + chat.EstimateText(string(d.InputSchema))
	}
	return n
}

// ToolDef is a tool as the model sees it.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// EventType says what an Event carries.
type EventType int

const (
	TextDelta      EventType = iota + 1 // Text: more answer text
	ReasoningDelta                      // Text: more reasoning text
	ToolCallStart                       // Index, ToolCallID, ToolName: the model starts a call
	ToolCallDelta                       // Index, Text: more of the call's JSON arguments
	ToolCallEnd                         // Index: the call's arguments are complete
)

// Event is one streamed delta.
type Event struct {
	Type       EventType
	Text       string
	Index      int // the tool call's position among this answer's calls
	ToolCallID string
	ToolName   string
}

// Result is a whole answer: its parts in order (reasoning, text, tool calls),
// token usage and why it stopped.
type Result struct {
	Parts        []chat.Part
	Usage        Usage
	FinishReason string // "stop", "tool_calls", "length", ... as normalised by the provider
}

// Usage counts one call's tokens.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Error is a failed model call, with what the engine needs to decide on a
// retry and to tell the client.
type Error struct {
	Kind       string        // rate_limited, overloaded, server, connection, timeout, cut_stream, bad_request, auth, KindContextLength, ...
	Provider   string        // "openai", "openai-responses", "anthropic", ...
	HTTPStatus int           // 0 when no HTTP answer
	Retryable  bool          // a later attempt may succeed
	RetryAfter time.Duration // the server's Retry-After, 0 if none
	Message    string
	Err        error // the underlying error, if any
}

func (e *Error) Error() string {
	if e.HTTPStatus != 0 {
		return fmt.Sprintf("%s: %s (HTTP %d): %s", e.Provider, e.Kind, e.HTTPStatus, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", e.Provider, e.Kind, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// KindContextLength is the Kind of a call refused because its prompt does
// not fit the model's context window. Retrying the same request cannot
// succeed (it is never Retryable); a shorter history can.
const KindContextLength = "context_length_exceeded"

// IsContextLength reports whether err is, or wraps, an *Error of kind
// KindContextLength.
func IsContextLength(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindContextLength
}

// Model is a configured model: the provider that serves it, the provider's
// model id, and its prices.
type Model struct {
	Name     string
	Provider Provider
	ModelID  string
	// InputPerMTok and OutputPerMTok are prices per million tokens; costs
	// are counted in micro-units of the same currency.
	InputPerMTok  float64
	OutputPerMTok float64
	// ContextWindow is the model's context window in tokens (0: unknown);
	// CompactAt the fraction of it at which a chat is compacted before a
	// step (0: never before; an overflow still compacts); CompactionModel
	// the model that writes summaries ("": this one).
	ContextWindow   int64
	CompactAt       float64
	CompactionModel string
}

// Cost returns the cost of a call's usage in micro-units: a price of 2.0 per
// million tokens costs 2 micro-units per token.
func (m Model) Cost(u Usage) int64 {
	return int64(float64(u.InputTokens)*m.InputPerMTok + float64(u.OutputTokens)*m.OutputPerMTok)
}
