package llmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/anthropic"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/llm/openai"
)

// These tests send histories through parley's providers, the official SDKs
// and the fakes, as every test above the llm packages does: a malformed one
// must fail as the real API fails it, a well-formed one must pass.

// historyFake is what these tests use of a fake.
type historyFake interface {
	Push(...llmtest.Turn)
	Requests() []llmtest.Request
	Rejections() []string
}

// historyAPI is one API with a provider pointed at a fresh fake.
type historyAPI struct {
	name  string // the provider's name in its errors
	start func(t *testing.T) (historyFake, llm.Provider)
}

var historyAPIs = []historyAPI{
	{"openai", func(t *testing.T) (historyFake, llm.Provider) {
		f := llmtest.NewOpenAIChat(t)
		return f, openai.NewChat(openai.Config{Model: "gpt-test", BaseURL: f.URL, APIKey: "k"})
	}},
	{"openai-responses", func(t *testing.T) (historyFake, llm.Provider) {
		f := llmtest.NewOpenAIResponses(t)
		return f, openai.NewResponses(openai.Config{Model: "gpt-test", BaseURL: f.URL, APIKey: "k"})
	}},
	{"anthropic", func(t *testing.T) (historyFake, llm.Provider) {
		f := llmtest.NewAnthropic(t)
		return f, anthropic.New(anthropic.Config{Model: "claude-test", BaseURL: f.URL, APIKey: "k"})
	}},
}

func userText(s string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart(s)}}
}

func call(id, name string) chat.Part {
	return chat.Part{Type: chat.PartToolCall, ToolCallID: id, ToolName: name, Args: json.RawMessage(`{}`)}
}

func result(id, name string) chat.Part {
	return chat.Part{Type: chat.PartToolResult, ToolCallID: id, ToolName: name, Output: json.RawMessage(`"ok"`)}
}

// twoCalls is a step that calls two tools.
var twoCalls = chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{
	chat.TextPart("Checking both."), call("call_w", "weather"), call("call_t", "time"),
}}

// callUnanswered asks two tools and answers one before the user speaks again.
var callUnanswered = []chat.Message{
	userText("Weather and time?"),
	twoCalls,
	{Role: chat.RoleTool, Parts: []chat.Part{result("call_w", "weather")}},
	userText("And the time?"),
}

// resultUnasked answers a call the history never made.
var resultUnasked = []chat.Message{
	userText("Hi"),
	{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("Hello.")}},
	{Role: chat.RoleTool, Parts: []chat.Part{result("call_x", "weather")}},
}

// wellFormed answers every call, each result in its own tool message, and
// goes on with another turn.
var wellFormed = []chat.Message{
	userText("Weather and time?"),
	twoCalls,
	{Role: chat.RoleTool, Parts: []chat.Part{result("call_t", "time")}},
	{Role: chat.RoleTool, Parts: []chat.Part{result("call_w", "weather")}},
	{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("Sunny, noon.")}},
	userText("Thanks!"),
}

// neverRetried wraps p so that a retry fails the test: a 400 is final.
func neverRetried(t *testing.T, p llm.Provider) llm.Provider {
	return llm.Retrying(p, llm.RetryPolicy{
		MaxAttempts: 4,
		Sleep: func(ctx context.Context, d time.Duration) error {
			t.Errorf("a retry after %v: a refused history must not be retried", d)
			return ctx.Err()
		},
	}, nil)
}

func TestMalformedHistoryIsRefused(t *testing.T) {
	cases := []struct {
		name    string
		history []chat.Message
		want    map[string]string // the API's message, by provider
	}{
		{"a call unanswered", callUnanswered, map[string]string{
			"openai": "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
				"The following tool_call_ids did not have response messages: call_t",
			"openai-responses": "No tool output found for function call call_t.",
			"anthropic": "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: call_t. " +
				"Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
		}},
		{"a result for no call", resultUnasked, map[string]string{
			"openai":           "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
			"openai-responses": "No tool call found for function call output with call_id call_x.",
			"anthropic": "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: call_x. " +
				"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
		}},
	}
	for _, a := range historyAPIs {
		for _, c := range cases {
			t.Run(a.name+"/"+c.name, func(t *testing.T) {
				f, p := a.start(t)
				f.Push(llmtest.Turn{Text: "never streamed"})
				var events []llm.Event
				_, err := neverRetried(t, p).Stream(context.Background(), llm.Request{Messages: c.history}, func(e llm.Event) error {
					events = append(events, e)
					return nil
				})
				var e *llm.Error
				if !errors.As(err, &e) {
					t.Fatalf("err = %v (%T), want an *llm.Error", err, err)
				}
				want := c.want[a.name]
				if e.HTTPStatus != http.StatusBadRequest || e.Kind != "bad_request" || e.Retryable || e.Provider != a.name {
					t.Errorf("error %+v, want a non-retryable bad_request, HTTP 400, from %s", e, a.name)
				}
				if e.Message != want {
					t.Errorf("message %q\nwant %q", e.Message, want)
				}
				if len(events) != 0 {
					t.Errorf("events %+v", events)
				}
				if got := f.Rejections(); len(got) != 1 || got[0] != want || len(f.Requests()) != 1 {
					t.Errorf("%d requests, rejections %q; want the one request, refused", len(f.Requests()), got)
				}
			})
		}
	}
}

func TestWellFormedHistoryPasses(t *testing.T) {
	for _, a := range historyAPIs {
		t.Run(a.name, func(t *testing.T) {
			f, p := a.start(t)
			f.Push(llmtest.Turn{Text: "You're welcome."})
			res, err := neverRetried(t, p).Stream(context.Background(), llm.Request{Messages: wellFormed}, func(llm.Event) error { return nil })
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if len(res.Parts) != 1 || res.Parts[0].Text != "You're welcome." {
				t.Errorf("parts %+v", res.Parts)
			}
			if got := f.Rejections(); len(got) != 0 {
				t.Errorf("rejections %q", got)
			}
		})
	}
}
