package anthropic_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/llmtest"
)

func TestRequestBody(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: "ok"})
	call := func(id, city string) chat.Part {
		return chat.Part{Type: chat.PartToolCall, ToolCallID: id, ToolName: "weather", Args: json.RawMessage(`{"city":"` + city + `"}`)}
	}
	req := llm.Request{
		System: "Be brief.",
		Messages: []chat.Message{
			{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("Weather in Paris and Rome?")}},
			{Role: chat.RoleAssistant, Parts: []chat.Part{
				{Type: chat.PartReasoning, Text: "two calls"}, // dropped: no signature to send back
				chat.TextPart("Checking."), call("toolu_1", "Paris"), call("toolu_2", "Rome"),
				{Type: chat.PartToolCall, ToolCallID: "toolu_3", ToolName: "now"}, // no args: {}
			}},
			{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolCallID: "toolu_1", ToolName: "weather", Output: json.RawMessage(`{"temp":20}`)}}},
			{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolCallID: "toolu_2", ToolName: "weather", Output: json.RawMessage(`"city not found"`), IsError: true}}},
			{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolCallID: "toolu_3", ToolName: "now", Output: json.RawMessage(`null`)}}},
			{Role: chat.RoleAssistant, Parts: []chat.Part{chat.TextPart("Paris: 20°C.")}},
			{Role: chat.RoleUser, Parts: []chat.Part{chat.TextPart("Thanks!")}},
		},
		Tools: []llm.ToolDef{
			{Name: "weather", Description: "Current weather.", InputSchema: json.RawMessage(
				`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
			{Name: "now"},
		},
		MaxOutputTokens: 321,
	}
	if _, _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}

	want := `{
		"model": "claude-test",
		"max_tokens": 321,
		"stream": true,
		"system": [{"type": "text", "text": "Be brief."}],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Checking."},
				{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
				{"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Rome"}},
				{"type": "tool_use", "id": "toolu_3", "name": "now", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "{\"temp\":20}"}]},
				{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": [{"type": "text", "text": "city not found"}]},
				{"type": "tool_result", "tool_use_id": "toolu_3"}
			]},
			{"role": "assistant", "content": [{"type": "text", "text": "Paris: 20°C."}]},
			{"role": "user", "content": [{"type": "text", "text": "Thanks!"}]}
		],
		"tools": [
			{"name": "weather", "description": "Current weather.", "input_schema":
				{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}},
			{"name": "now", "input_schema": {"type": "object"}}
		]
	}`
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the server saw %d requests, want 1", len(reqs))
	}
	assertJSON(t, reqs[0].Body, want)
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-ant-test" {
		t.Errorf("Authorization = %q, want the configured key", got)
	}
}

func TestRequestDefaults(t *testing.T) {
	p, f := setup(t)
	f.Push(llmtest.Turn{Text: "ok"})
	req := hello()
	req.Model = "claude-other"
	if _, _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Model     string          `json:"model"`
		MaxTokens int             `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Tools     json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(f.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != "claude-other" || body.MaxTokens != 4096 || body.System != nil || body.Tools != nil {
		t.Errorf("body = %+v; want the request's model, max_tokens 4096, no system, no tools", body)
	}
}

func TestRequestWithoutMessagesIsRefused(t *testing.T) {
	p, f := setup(t)
	_, _, err := run(t, p, llm.Request{Messages: []chat.Message{{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartReasoning, Text: "x"}}}}})
	if e := apiError(t, err); e.Kind != "bad_request" || e.Retryable {
		t.Errorf("got %v, want a non-retryable bad_request", e)
	}
	if n := len(f.Requests()); n != 0 {
		t.Errorf("the server saw %d requests, want none", n)
	}
}

// assertJSON fails unless got and want hold the same JSON value.
func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("body =\n%s\nwant\n%s", gi, wi)
	}
}
