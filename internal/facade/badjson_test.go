package facade_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestNULAndDepthRefused checks that the facade holds its requests to what
// parley's API takes, on both databases alike: no string holding U+0000 (in
// the body, or in a call's arguments, JSON inside a string), nothing nested
// deeper than the API's limit. Each is a 400 naming the field, and nothing
// is stored.
func TestNULAndDepthRefused(t *testing.T) {
	const (
		user = `{"role":"user","content":"Weather in Oslo?"}`
		tool = `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}`
	)
	call := func(id, args string) string {
		return `{"role":"assistant","content":null,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"get_weather","arguments":"` + args + `"}}]}`
	}
	result := func(id, content string) string {
		return `{"role":"tool","tool_call_id":"` + id + `","content":"` + content + `"}`
	}
	completion := func(msgs ...string) string {
		return `{"model":"fake","tools":[` + tool + `],"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	nested := strings.Repeat("[", 3000) + strings.Repeat("]", 3000)
	cases := []struct {
		name, path, body, param string
	}{
		{"system message", "/chat/completions", completion(`{"role":"system","content":"be\u0000brief"}`, user), "messages[0].content"},
		{"user message", "/chat/completions", completion(`{"role":"user","content":[{"type":"text","text":"\u0000"}]}`), "messages[0].content[0].text"},
		{"tool description", "/chat/completions", `{"model":"fake","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","description":"a\u0000b"}}]}`, "tools[0].function.description"},
		{"call id", "/chat/completions", completion(user, call(`call_\u0000`, `{}`), result(`call_\u0000`, "-5C")), "messages[1].tool_calls[0].id"},
		{"call arguments", "/chat/completions", completion(user, call("call_1", `{\"city\":\"Os\\u0000lo\"}`), result("call_1", "-5C")), "messages[1].tool_calls[0].function.arguments"},
		{"call arguments key", "/chat/completions", completion(user, call("call_1", `{\"ci\\u0000ty\":\"Oslo\"}`), result("call_1", "-5C")), "messages[1].tool_calls[0].function.arguments"},
		{"tool result", "/chat/completions", completion(user, call("call_1", `{}`), result("call_1", `-5\u0000C`)), "messages[2].content"},
		{"nested call arguments", "/chat/completions", completion(user, call("call_1", nested), result("call_1", "-5C")), "messages[1].tool_calls[0].function.arguments"},
		{"nested parameters", "/chat/completions", `{"model":"fake","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","default":` + nested + `}}}]}`,
			"tools[0].function.parameters.default" + strings.Repeat("[0]", 64-5)},
		{"instructions", "/responses", `{"model":"fake","instructions":"be\u0000brief","input":"hi"}`, "instructions"},
		{"previous_response_id", "/responses", `{"model":"fake","previous_response_id":"resp_\u0000_1","input":"hi"}`, "previous_response_id"},
		{"function_call arguments", "/responses", `{"model":"fake","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"a\":\"\\u0000\"}"},{"type":"function_call_output","call_id":"call_1","output":"x"}]}`, "input[1]"},
		{"nested function_call arguments", "/responses", `{"model":"fake","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"` + nested + `"},{"type":"function_call_output","call_id":"call_1","output":"x"}]}`, "input[1]"},
		{"function_call_output", "/responses", `{"model":"fake","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"\u0000"}]}`, "input[2].output"},
	}
	onBothStores(t, func(t *testing.T, r *replica, fake *llmtest.OpenAIChat) {
		tok := r.token("alice")
		for _, tc := range cases {
			fake.Push(llmtest.Turn{Text: "Cold."}) // what a run that should not be would take
			status, out := r.post(tok, tc.path, tc.body)
			e, _ := out["error"].(map[string]any)
			if status != http.StatusBadRequest || e == nil || e["type"] != "invalid_request_error" || e["param"] != tc.param {
				t.Errorf("%s: %d %v, want 400 invalid_request_error param %q", tc.name, status, out, tc.param)
			}
		}
		if cs := r.chats("alice"); len(cs) != 0 {
			t.Errorf("%d chats stored, want none", len(cs))
		}
		if n := len(fake.Requests()); n != 0 {
			t.Errorf("the model got %d requests, want none", n)
		}
	})
}
