// Package anthropic is parley's llm.Provider for the Anthropic Messages API,
// built on the official SDK (github.com/anthropics/anthropic-sdk-go/v2).
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
)

// ProviderName is the llm.Error.Provider of every error this package returns.
const ProviderName = "anthropic"

// DefaultMaxTokens is the max_tokens sent when neither the request nor the
// config sets one; the API requires the field, and 4096 is accepted by every
// current model.
const DefaultMaxTokens = 4096

// Config says how to reach the API.
type Config struct {
	Model     string                 // model id used when Request.Model is empty
	BaseURL   string                 // "" for the SDK's default (https://api.anthropic.com)
	APIKey    string                 // the API key
	MaxTokens int                    // max_tokens when Request.MaxOutputTokens is 0; 0 means DefaultMaxTokens
	Options   []option.RequestOption // extra SDK options, applied last (tests: an HTTP client, headers)
}

// Provider streams answers from the Messages API. It is safe for concurrent use.
type Provider struct {
	client    sdk.Client
	model     string
	maxTokens int
}

var (
	_ llm.Provider = (*Provider)(nil)
	_ llm.Named    = (*Provider)(nil)
)

// Name is the API this provider speaks, for errors raised around it.
func (p *Provider) Name() string { return ProviderName }

// New returns a Provider for cfg. The SDK's own retries are disabled (the
// engine retries, with a retry event per attempt) and the SDK's environment
// defaults (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ...) are ignored, so the
// parley config is the only source of settings.
func New(cfg Config) *Provider {
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithMaxRetries(0)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	opts = append(opts, cfg.Options...)
	maxTokens := cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Provider{client: sdk.NewClient(opts...), model: cfg.Model, maxTokens: maxTokens}
}

// Stream makes one streaming Messages call. Failures are *llm.Error, except a
// done ctx (its error is returned, wrapped) and an error from emit (returned
// as is).
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Result, error) {
	params, err := p.params(req)
	if err != nil {
		return llm.Result{}, err
	}
	var res *http.Response
	stream := p.client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&res))
	defer stream.Close()

	a := newAssembler(emit)
	for stream.Next() {
		if err := a.add(stream.Current()); err != nil {
			return llm.Result{}, err
		}
		if a.done {
			return a.result(), nil
		}
	}
	err = stream.Err()
	if ctx.Err() != nil {
		return llm.Result{}, fmt.Errorf("anthropic stream: %w", ctx.Err())
	}
	if err == nil {
		return llm.Result{}, &llm.Error{Kind: "cut_stream", Provider: ProviderName, Retryable: true,
			Message: "stream ended without message_stop"}
	}
	return llm.Result{}, classify(err, res != nil)
}

// params builds the SDK request for req.
func (p *Provider) params(req llm.Request) (sdk.MessageNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = p.maxTokens
	}
	msgs, err := messages(req.Messages)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(model),
		MaxTokens: int64(maxTokens),
		Messages:  msgs,
		Tools:     tools(req.Tools),
	}
	system := req.System
	if f := req.Format; f != nil {
		// A strict format is constrained natively (output_config.format),
		// which takes only the subset of JSON Schema Anthropic supports;
		// any other is stated in the system prompt, and parley checks
		// the answer either way.
		if f.Strict {
			var sch map[string]any
			if err := json.Unmarshal(f.Schema, &sch); err != nil {
				return sdk.MessageNewParams{}, fmt.Errorf("response format %s: schema: %w", f.Name, err)
			}
			params.OutputConfig = sdk.OutputConfigParam{Format: sdk.JSONOutputFormatParam{Schema: sch}}
		} else {
			system = strings.TrimSpace(system + "\n\n" + llm.FormatInstruction(*f))
		}
	}
	if system != "" {
		params.System = []sdk.TextBlockParam{{Text: system}}
	}
	return params, nil
}

// assembler turns stream events into llm events and the final Result.
type assembler struct {
	emit   func(llm.Event) error
	parts  []chat.Part
	blocks map[int64]block // by the API's content block index
	calls  int             // tool calls seen so far
	usage  llm.Usage
	stop   sdk.StopReason
	done   bool // message_stop arrived
}

// block is one open content block: where its part is and, for a tool call,
// its position among the answer's calls.
type block struct {
	part int // index in parts; -1 for blocks parley ignores
	call int
}

func newAssembler(emit func(llm.Event) error) *assembler {
	return &assembler{emit: emit, blocks: map[int64]block{}}
}

// add handles one stream event.
func (a *assembler) add(ev sdk.MessageStreamEventUnion) error {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		a.usage.InputTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		a.usage.OutputTokens = u.OutputTokens
	case "content_block_start":
		return a.start(ev.Index, ev.ContentBlock)
	case "content_block_delta":
		return a.delta(ev.Index, ev.Delta)
	case "content_block_stop":
		b, ok := a.blocks[ev.Index]
		if ok && b.part >= 0 && a.parts[b.part].Type == chat.PartToolCall {
			if len(a.parts[b.part].Args) == 0 {
				a.parts[b.part].Args = json.RawMessage("{}")
			}
			return a.emit(llm.Event{Type: llm.ToolCallEnd, Index: b.call})
		}
	case "message_delta":
		// message_delta usage is cumulative; input counts appear only in newer API versions.
		u := ev.Usage
		if in := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens; in > 0 {
			a.usage.InputTokens = in
		}
		a.usage.OutputTokens = u.OutputTokens
		if ev.Delta.StopReason != "" {
			a.stop = ev.Delta.StopReason
		}
	case "message_stop":
		a.done = true
	}
	return nil
}

// start opens a content block.
func (a *assembler) start(index int64, cb sdk.ContentBlockStartEventContentBlockUnion) error {
	switch cb.Type {
	case "text":
		a.blocks[index] = a.open(chat.Part{Type: chat.PartText, Text: cb.Text}, -1)
		if cb.Text != "" {
			return a.emit(llm.Event{Type: llm.TextDelta, Text: cb.Text})
		}
	case "thinking":
		a.blocks[index] = a.open(chat.Part{Type: chat.PartReasoning, Text: cb.Thinking}, -1)
		if cb.Thinking != "" {
			return a.emit(llm.Event{Type: llm.ReasoningDelta, Text: cb.Thinking})
		}
	case "tool_use":
		call := a.calls
		a.calls++
		a.blocks[index] = a.open(chat.Part{Type: chat.PartToolCall, ToolCallID: cb.ID, ToolName: cb.Name}, call)
		return a.emit(llm.Event{Type: llm.ToolCallStart, Index: call, ToolCallID: cb.ID, ToolName: cb.Name})
	default:
		// redacted_thinking, server tool blocks: nothing parley can show or send back.
		a.blocks[index] = block{part: -1}
	}
	return nil
}

// open appends p and returns its block.
func (a *assembler) open(p chat.Part, call int) block {
	a.parts = append(a.parts, p)
	return block{part: len(a.parts) - 1, call: call}
}

// delta extends an open content block.
func (a *assembler) delta(index int64, d sdk.MessageStreamEventUnionDelta) error {
	b, ok := a.blocks[index]
	if !ok || b.part < 0 {
		return nil
	}
	p := &a.parts[b.part]
	switch d.Type {
	case "text_delta":
		p.Text += d.Text
		return a.emit(llm.Event{Type: llm.TextDelta, Text: d.Text})
	case "thinking_delta":
		p.Text += d.Thinking
		return a.emit(llm.Event{Type: llm.ReasoningDelta, Text: d.Thinking})
	case "input_json_delta":
		if d.PartialJSON == "" {
			return nil // the API opens every tool_use block with an empty delta
		}
		p.Args = append(p.Args, d.PartialJSON...)
		return a.emit(llm.Event{Type: llm.ToolCallDelta, Index: b.call, Text: d.PartialJSON})
	}
	// signature_delta, citations_delta: no part field holds them.
	return nil
}

// result is the whole answer; empty text and reasoning blocks are left out.
func (a *assembler) result() llm.Result {
	parts := make([]chat.Part, 0, len(a.parts))
	for _, p := range a.parts {
		if p.Type != chat.PartToolCall && p.Text == "" {
			continue
		}
		parts = append(parts, p)
	}
	return llm.Result{Parts: parts, Usage: a.usage, FinishReason: finishReason(a.stop)}
}

// finishReason normalises the API's stop_reason to parley's vocabulary.
func finishReason(r sdk.StopReason) string {
	switch r {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence:
		return "stop"
	case sdk.StopReasonToolUse:
		return "tool_calls"
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return "length"
	case sdk.StopReasonRefusal:
		return "content_filter"
	}
	return string(r)
}
