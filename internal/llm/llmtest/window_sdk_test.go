package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/anthropic"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/llm/openai"
)

// These tests send requests through parley's providers and the official
// SDKs to fakes with a context window: usage reports the token estimates,
// and a request over the window fails as the real API fails it.

// windowFake is what these tests use of a fake.
type windowFake interface {
	Push(...llmtest.Turn)
	Requests() []llmtest.Request
	SetContextWindow(tokens int)
	MaxPromptTokens() int64
}

// windowAPI is one API with a provider pointed at a fresh fake, and the
// message of its error for a prompt of p tokens over a window of w.
type windowAPI struct {
	name    string
	start   func(t *testing.T) (windowFake, llm.Provider)
	tooLong func(p int64, w int) string
}

var windowAPIs = []windowAPI{
	{
		"openai",
		func(t *testing.T) (windowFake, llm.Provider) {
			f := llmtest.NewOpenAIChat(t)
			return f, openai.NewChat(openai.Config{Model: "gpt-test", BaseURL: f.URL, APIKey: "k"})
		},
		func(p int64, w int) string {
			return fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", w, p)
		},
	},
	{
		"openai-responses",
		func(t *testing.T) (windowFake, llm.Provider) {
			f := llmtest.NewOpenAIResponses(t)
			return f, openai.NewResponses(openai.Config{Model: "gpt-test", BaseURL: f.URL, APIKey: "k"})
		},
		func(int64, int) string {
			return "Your input exceeds the context window of this model. Please adjust your input and try again."
		},
	},
	{
		"anthropic",
		func(t *testing.T) (windowFake, llm.Provider) {
			f := llmtest.NewAnthropic(t)
			return f, anthropic.New(anthropic.Config{Model: "claude-test", BaseURL: f.URL, APIKey: "k"})
		},
		func(p int64, w int) string { return fmt.Sprintf("prompt is too long: %d tokens > %d maximum", p, w) },
	},
}

// longRequest has every kind of content the estimate counts: a system
// prompt, user and assistant text, a call with arguments written with
// spaces and keys out of order, its result, and a tool with a description
// and a schema.
var longRequest = llm.Request{
	System: "You are a careful assistant. Answer in one sentence.",
	Messages: []chat.Message{
		userText("What is the weather in Paris, and should I take an umbrella?"),
		{Role: chat.RoleAssistant, Parts: []chat.Part{
			chat.TextPart("Let me look it up."),
			{Type: chat.PartToolCall, ToolCallID: "call_w", ToolName: "weather", Args: json.RawMessage(`{ "units": "metric", "city": "Paris" }`)},
		}},
		{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolCallID: "call_w", ToolName: "weather",
			Output: json.RawMessage(`{"sky":"rain","temperature_c":14,"wind":"W 20 km/h"}`)}}},
	},
	Tools: []llm.ToolDef{{
		Name:        "weather",
		Description: "The current weather in a city.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "units": {"enum": ["metric", "imperial"]}}, "required": ["city"]}`),
	}},
}

// noRetry is a retry policy that would retry any retryable error at once.
var noRetry = llm.RetryPolicy{
	MaxAttempts: 3,
	Sleep:       func(context.Context, time.Duration) error { return nil },
	Rand:        func() float64 { return 0 },
}

func TestPromptTokensCountsCharacters(t *testing.T) {
	// 12 + 6 + 8 + 15 (the arguments, canonical: {"a":"x","b":1})
	// + 2 (the result's text) + 1 + 4 + 17 (the schema, canonical) = 65
	// characters: 17 tokens.
	req := llm.Request{
		System: "Be concise.\n",
		Messages: []chat.Message{
			userText("Hello?"),
			{Role: chat.RoleAssistant, Parts: []chat.Part{
				{Type: chat.PartReasoning, Text: "not counted"},
				chat.TextPart("Héllo, é"),
				{Type: chat.PartToolCall, ToolCallID: "call_1", ToolName: "not counted", Args: json.RawMessage(`{ "b": 1.0, "a": "x" }`)},
			}},
			{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolCallID: "call_1", Output: json.RawMessage(`"ok"`)}}},
		},
		Tools: []llm.ToolDef{{Name: "t", Description: "does", InputSchema: json.RawMessage(` { "type" : "object" } `)}},
	}
	if got := llmtest.PromptTokens(req); got != 17 {
		t.Errorf("PromptTokens = %d, want 17 (65 characters)", got)
	}
	turn := llmtest.Turn{Reasoning: "abc", Text: "défg", ToolCalls: []llmtest.ToolCall{{Name: "x", Args: `{}`}}}
	if got := llmtest.OutputTokens(turn); got != 3 {
		t.Errorf("OutputTokens = %d, want 3 (9 characters)", got)
	}
}

func TestUsageIsTheEstimate(t *testing.T) {
	want := llmtest.PromptTokens(longRequest)
	turn := llmtest.Turn{Text: "It is raining in Paris: take an umbrella.", ToolCalls: []llmtest.ToolCall{{ID: "call_x", Name: "weather", Args: `{"city":"Lyon"}`}}}
	for _, a := range windowAPIs {
		t.Run(a.name, func(t *testing.T) {
			f, p := a.start(t)
			f.SetContextWindow(int(want)) // a prompt as long as the window fits
			f.Push(turn)
			res, err := p.Stream(context.Background(), longRequest, func(llm.Event) error { return nil })
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if res.Usage.InputTokens != want || res.Usage.OutputTokens != llmtest.OutputTokens(turn) {
				t.Errorf("usage %+v, want %d in (PromptTokens), %d out (OutputTokens)", res.Usage, want, llmtest.OutputTokens(turn))
			}
			reqs := f.Requests()
			if len(reqs) != 1 || reqs[0].PromptTokens != want || reqs[0].OverWindow || f.MaxPromptTokens() != want {
				t.Errorf("requests %+v, most prompt tokens %d; want one of %d tokens", reqs, f.MaxPromptTokens(), want)
			}
		})
	}
}

func TestScriptedUsageWins(t *testing.T) {
	for _, a := range windowAPIs {
		t.Run(a.name, func(t *testing.T) {
			f, p := a.start(t)
			f.Push(
				llmtest.Turn{Text: "scripted input", Usage: llmtest.Usage{InputTokens: 1234}},
				llmtest.Turn{Text: "scripted output", Usage: llmtest.Usage{OutputTokens: 99}},
			)
			res, err := p.Stream(context.Background(), longRequest, func(llm.Event) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if want := (llm.Usage{InputTokens: 1234, OutputTokens: 4}); res.Usage != want {
				t.Errorf("usage %+v, want %+v", res.Usage, want)
			}
			res, err = p.Stream(context.Background(), longRequest, func(llm.Event) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if want := (llm.Usage{InputTokens: llmtest.PromptTokens(longRequest), OutputTokens: 99}); res.Usage != want {
				t.Errorf("usage %+v, want %+v", res.Usage, want)
			}
		})
	}
}

func TestOverTheWindowIsTheAPIsError(t *testing.T) {
	prompt := llmtest.PromptTokens(longRequest)
	window := int(prompt) - 1
	for _, a := range windowAPIs {
		t.Run(a.name, func(t *testing.T) {
			f, p := a.start(t)
			f.SetContextWindow(window)
			f.Push(llmtest.Turn{Text: "answered once the prompt fits"})

			var retries []llm.RetryInfo
			r := llm.Retrying(p, noRetry, func(ri llm.RetryInfo) { retries = append(retries, ri) })
			_, err := r.Stream(context.Background(), longRequest, func(llm.Event) error { return nil })
			var e *llm.Error
			if !llm.IsContextLength(err) || !errors.As(err, &e) {
				t.Fatalf("err = %v, want a %s error", err, llm.KindContextLength)
			}
			if e.Retryable || e.HTTPStatus != 400 || e.Provider != a.name || e.Message != a.tooLong(prompt, window) {
				t.Errorf("error %+v, want not retryable, HTTP 400, from %s, message %q", e, a.name, a.tooLong(prompt, window))
			}
			if len(retries) != 0 {
				t.Errorf("retried: %+v", retries)
			}
			reqs := f.Requests()
			if len(reqs) != 1 || !reqs[0].OverWindow || reqs[0].PromptTokens != prompt || f.MaxPromptTokens() != prompt {
				t.Fatalf("requests %+v, want one over the window with %d prompt tokens", reqs, prompt)
			}

			// The refused request used no turn: a shorter one gets it.
			short := llm.Request{Messages: longRequest.Messages[:1]}
			res, err := p.Stream(context.Background(), short, func(llm.Event) error { return nil })
			if err != nil {
				t.Fatalf("the short request: %v", err)
			}
			if len(res.Parts) != 1 || !strings.HasPrefix(res.Parts[0].Text, "answered once") {
				t.Errorf("the short request got %+v, want the scripted turn", res.Parts)
			}
			if last := f.Requests()[1]; last.OverWindow || last.PromptTokens != llmtest.PromptTokens(short) || last.PromptTokens > int64(window) {
				t.Errorf("the short request was logged as %+v", last)
			}
		})
	}
}
