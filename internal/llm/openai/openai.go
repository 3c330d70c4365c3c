// Package openai implements llm.Provider on the official OpenAI Go SDK, for
// the two OpenAI APIs: Chat Completions (also what OpenAI-compatible servers
// such as Ollama, vLLM, llama.cpp and OpenRouter speak) and Responses.
//
// Both providers call the API statelessly, sending the whole history on each
// call, and stream. The SDK's own retries are off: parley retries through
// llm.Retrying, so every attempt is visible as a `retry` event. Errors come
// back as *llm.Error, classified for that decision.
//
// Reasoning parts of the history are not sent back: Chat Completions has no
// input field for them (DeepSeek even refuses reasoning_content in input),
// and the Responses API only accepts its own reasoning items, with the
// encrypted content parley does not keep; a model answers well from the
// visible text and tool calls.
package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

var (
	_ llm.Provider = (*Chat)(nil)
	_ llm.Named    = (*Chat)(nil)
	_ llm.Provider = (*Responses)(nil)
	_ llm.Named    = (*Responses)(nil)
)

// DefaultBaseURL is OpenAI's API.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config says which model to call and where.
type Config struct {
	// Model is the provider's model id, used when a Request names none.
	Model string
	// BaseURL is the API's base URL, for example http://127.0.0.1:11434/v1
	// for Ollama; "" means OpenAI's.
	BaseURL string
	// APIKey is sent as a bearer token; "" sends none (local servers). The
	// SDK's OPENAI_API_KEY and OPENAI_BASE_URL environment variables are
	// never used, so a key cannot leak to another server; the SDK still
	// reads OPENAI_ORG_ID, OPENAI_PROJECT_ID and OPENAI_CUSTOM_HEADERS.
	APIKey string
	// HTTPClient makes the requests; nil uses the SDK's default client. It
	// must not have a Timeout: that would cut long streams.
	HTTPClient *http.Client
	// ReasoningEffort ("minimal", "low", "medium", "high"), sent when set;
	// only reasoning models accept it.
	ReasoningEffort string
	// ReasoningSummary ("auto", "concise", "detailed") asks the Responses API
	// for reasoning summaries, streamed as reasoning deltas; Chat ignores it.
	ReasoningSummary string
	// Options are appended to the SDK client's options (headers, tests).
	Options []option.RequestOption
}

// newClient builds the SDK client for cfg, with the SDK's retries off.
func newClient(cfg Config) sdk.Client {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(0),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return sdk.NewClient(append(opts, cfg.Options...)...)
}

// model is the model id of a call: the request's, or the configured one.
func model(cfg Config, req llm.Request) string {
	if req.Model != "" {
		return req.Model
	}
	return cfg.Model
}

// schema decodes a tool's JSON Schema for the SDK; an empty one accepts an
// object with any properties.
func schema(t llm.ToolDef) (map[string]any, error) {
	if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(t.InputSchema, &m); err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
	}
	return m, nil
}

// formatSchema decodes a structured output's schema for the SDK's params.
func formatSchema(f chat.OutputFormat) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(f.Schema, &m); err != nil {
		return nil, fmt.Errorf("response format %s: schema: %w", f.Name, err)
	}
	return m, nil
}

// userText joins the text parts of a message.
func userText(m chat.Message) string {
	var texts []string
	for _, p := range m.Parts {
		if p.Type == chat.PartText && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// hasFiles reports whether m holds a file part.
func hasFiles(m chat.Message) bool {
	for _, p := range m.Parts {
		if p.Type == chat.PartFile {
			return true
		}
	}
	return false
}

// fileText is what the model reads of a file sent as text: a text file's
// name and content, or a note naming one that cannot be sent (a PDF on the
// web, which these APIs take only as bytes, among them).
func fileText(f llm.File) string {
	if f.Text != "" {
		return f.Text
	}
	return fmt.Sprintf("[file %s at %s]", f.Filename(), f.RemoteURL)
}

// callArgs is a stored call's arguments as the API wants them: a JSON text.
// Arguments the model once sent as invalid JSON were stored as a JSON string
// (see resultArgs), and go back as they came.
func callArgs(p chat.Part) string {
	if len(p.Args) == 0 {
		return "{}"
	}
	var s string
	if json.Unmarshal(p.Args, &s) == nil {
		return s
	}
	return string(p.Args)
}

// resultArgs turns the arguments a model streamed into a part's Args: ""
// becomes {}, valid JSON stays as is, and anything else becomes a JSON
// string holding the text, so the part is always valid JSON and the
// engine's schema check answers the model with an error it can correct.
func resultArgs(args string) json.RawMessage {
	switch {
	case strings.TrimSpace(args) == "":
		return json.RawMessage("{}")
	case json.Valid([]byte(args)):
		return json.RawMessage(args)
	}
	quoted, _ := json.Marshal(args)
	return quoted
}

// toolOutput is a tool result as the API's text: a JSON string as its text,
// other JSON as is; an error result is prefixed with "error: " since neither
// API has an error flag.
func toolOutput(p chat.Part) string {
	out := "null"
	if len(p.Output) > 0 {
		out = string(p.Output)
		var s string
		if json.Unmarshal(p.Output, &s) == nil {
			out = s
		}
	}
	if p.IsError {
		return "error: " + out
	}
	return out
}

// call is a tool call being streamed.
type call struct {
	id, name string
	args     strings.Builder
	ended    bool
}

// answer accumulates a streamed answer into an llm.Result.
type answer struct {
	emit      func(llm.Event) error
	reasoning strings.Builder
	text      strings.Builder
	calls     []*call
}

func (a *answer) addReasoning(s string) error {
	if s == "" {
		return nil
	}
	a.reasoning.WriteString(s)
	return a.emit(llm.Event{Type: llm.ReasoningDelta, Text: s})
}

func (a *answer) addText(s string) error {
	if s == "" {
		return nil
	}
	a.text.WriteString(s)
	return a.emit(llm.Event{Type: llm.TextDelta, Text: s})
}

// startCall opens a new call and returns its index.
func (a *answer) startCall(id, name string) (int, error) {
	a.calls = append(a.calls, &call{id: id, name: name})
	i := len(a.calls) - 1
	return i, a.emit(llm.Event{Type: llm.ToolCallStart, Index: i, ToolCallID: id, ToolName: name})
}

func (a *answer) addArgs(i int, s string) error {
	if s == "" {
		return nil
	}
	a.calls[i].args.WriteString(s)
	return a.emit(llm.Event{Type: llm.ToolCallDelta, Index: i, Text: s})
}

// endCall closes call i once; final, when not "", replaces the streamed
// arguments (the API's complete copy wins).
func (a *answer) endCall(i int, final string) error {
	c := a.calls[i]
	if final != "" && final != c.args.String() {
		c.args.Reset()
		c.args.WriteString(final)
	}
	if c.ended {
		return nil
	}
	c.ended = true
	return a.emit(llm.Event{Type: llm.ToolCallEnd, Index: i})
}

// endCalls closes every call still open, in order.
func (a *answer) endCalls() error {
	for i := range a.calls {
		if err := a.endCall(i, ""); err != nil {
			return err
		}
	}
	return nil
}

// parts is the answer in order: reasoning, text, tool calls.
func (a *answer) parts() []chat.Part {
	var parts []chat.Part
	if a.reasoning.Len() > 0 {
		parts = append(parts, chat.Part{Type: chat.PartReasoning, Text: a.reasoning.String()})
	}
	if a.text.Len() > 0 {
		parts = append(parts, chat.TextPart(a.text.String()))
	}
	for _, c := range a.calls {
		parts = append(parts, chat.Part{Type: chat.PartToolCall, ToolCallID: c.id, ToolName: c.name, Args: resultArgs(c.args.String())})
	}
	return parts
}

// finish normalises a finish reason: an answer with tool calls finished
// for them, whatever a lenient server said.
func (a *answer) finish(reason string) string {
	if len(a.calls) > 0 && (reason == "stop" || reason == "" || reason == "function_call") {
		return "tool_calls"
	}
	if reason == "" {
		return "stop"
	}
	return reason
}
