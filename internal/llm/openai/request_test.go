package openai_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// conversation is a history with every kind of part: a step with reasoning,
// text and two tool calls, their results (one an error) in a tool message,
// and a later turn.
var conversation = llm.Request{
	System:          "Be brief.",
	MaxOutputTokens: 256,
	Messages: []chat.Message{
		{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("Weather and time in Paris?")}},
		{Role: chat.RoleAssistant, Parts: []chat.Part{
			{Type: chat.PartReasoning, Text: "Two tools needed."},
			chat.TextPart("Checking both."),
			{Type: chat.PartToolCall, ToolCallID: "c1", ToolName: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)},
			{Type: chat.PartToolCall, ToolCallID: "c2", ToolName: "get_time"},
		}},
		{Role: chat.RoleTool, Parts: []chat.Part{
			{Type: chat.PartToolResult, ToolCallID: "c1", ToolName: "get_weather", Output: json.RawMessage(`{"temp":21}`)},
			{Type: chat.PartToolResult, ToolCallID: "c2", ToolName: "get_time", Output: json.RawMessage(`"no clock"`), IsError: true},
		}},
		{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("21°C; no time.")}},
		{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("Thanks!")}},
	},
	Tools: []llm.ToolDef{
		{Name: "get_weather", Description: "Current weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		{Name: "get_time"},
	},
}

// wantChat is the Chat Completions body for conversation (the fields that
// matter).
const wantChat = `{
	"model": "gpt-test",
	"stream": true,
	"stream_options": {"include_usage": true},
	"max_completion_tokens": 256,
	"messages": [
		{"role": "system", "content": "Be brief."},
		{"role": "user", "content": "Weather and time in Paris?"},
		{"role": "assistant", "content": "Checking both.", "tool_calls": [
			{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
			{"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
		]},
		{"role": "tool", "tool_call_id": "c1", "content": "{\"temp\":21}"},
		{"role": "tool", "tool_call_id": "c2", "content": "error: no clock"},
		{"role": "assistant", "content": "21°C; no time."},
		{"role": "user", "content": "Thanks!"}
	],
	"tools": [
		{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
		{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
	]
}`

// wantResponses is the Responses body for conversation.
const wantResponses = `{
	"model": "gpt-test",
	"stream": true,
	"store": false,
	"instructions": "Be brief.",
	"max_output_tokens": 256,
	"reasoning": {"summary": "auto"},
	"input": [
		{"role": "user", "content": "Weather and time in Paris?"},
		{"role": "assistant", "content": "Checking both."},
		{"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
		{"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": "{}"},
		{"type": "function_call_output", "call_id": "c1", "output": "{\"temp\":21}"},
		{"type": "function_call_output", "call_id": "c2", "output": "error: no clock"},
		{"role": "assistant", "content": "21°C; no time."},
		{"role": "user", "content": "Thanks!"}
	],
	"tools": [
		{"type": "function", "name": "get_weather", "description": "Current weather", "strict": false,
			"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
		{"type": "function", "name": "get_time", "strict": false, "parameters": {"type": "object", "properties": {}}}
	]
}`

func TestRequestBody(t *testing.T) {
	want := map[string]string{"openai": wantChat, "openai-responses": wantResponses}
	eachAPI(t, func(t *testing.T, a api, f fake, p llm.Provider) {
		f.Push(llmtest.Turn{Text: "You're welcome."})
		if _, _, err := stream(t, p, conversation); err != nil {
			t.Fatalf("Stream: %v", err)
		}
		reqs := f.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d requests", len(reqs))
		}
		if got := reqs[0].Header.Get("Authorization"); got != "Bearer test-key" {
			t.Errorf("Authorization = %q", got)
		}
		if bytes.Contains(reqs[0].Body, []byte("Two tools needed")) {
			t.Error("reasoning must not be sent back")
		}
		var body, expected map[string]any
		if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(want[a.name]), &expected); err != nil {
			t.Fatal(err)
		}
		for key, w := range expected {
			if !reflect.DeepEqual(body[key], w) {
				got, _ := json.MarshalIndent(body[key], "", "  ")
				exp, _ := json.MarshalIndent(w, "", "  ")
				t.Errorf("%s =\n%s\nwant\n%s", key, got, exp)
			}
		}
	})
}
