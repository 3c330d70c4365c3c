package llmtest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// These tests pin down which histories each fake refuses, rule by rule, on
// raw JSON; history_sdk_test.go drives the same refusals through parley's
// providers and the official SDKs.

// historyCase is a conversation and what the fake must answer to it: the
// error message and param, or "" for a history the API accepts.
type historyCase struct {
	name    string
	history string
	message string
	param   string
}

// checkHistory runs cases through check, which parses a request body made
// by body from each case's history.
func checkHistory(t *testing.T, cases []historyCase, body func(history string) string, check func([]byte) *historyError) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := check([]byte(body(c.history)))
			switch {
			case c.message == "" && got != nil:
				t.Errorf("refused a valid history: %+v", *got)
			case c.message != "" && got == nil:
				t.Errorf("accepted it, want %q", c.message)
			case got != nil && (got.message != c.message || got.param != c.param):
				t.Errorf("got %q (param %q)\nwant %q (param %q)", got.message, got.param, c.message, c.param)
			}
		})
	}
}

// parseOpenAI reads a body as the OpenAI fakes do.
func parseOpenAI(t *testing.T, body []byte) openaiRequest {
	t.Helper()
	var req openaiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &req.raw); err != nil {
		t.Fatal(err)
	}
	return req
}

const (
	chatUser = `{"role":"user","content":"hi"}`
	chatCall = `{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]}`
	chatToolA = `{"role":"tool","tool_call_id":"call_a","content":"1"}`
	chatToolB = `{"role":"tool","tool_call_id":"call_b","content":"2"}`
	chatText  = `{"role":"assistant","content":"done"}`

	missingCallB = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
		"The following tool_call_ids did not have response messages: call_b"
	strayTool = "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
)

func TestChatHistoryRules(t *testing.T) {
	seq := func(msgs ...string) string { return strings.Join(msgs, ",") }
	cases := []historyCase{
		{"no tools", seq(`{"role":"system","content":"s"}`, chatUser, chatText, chatUser), "", ""},
		{"calls answered in any order", seq(chatUser, chatCall, chatToolB, chatToolA, chatText, chatUser), "", ""},
		{"a duplicate answer", seq(chatUser, chatCall, chatToolA, chatToolB, chatToolA, chatUser), "", ""},
		{"a call unanswered before the next message", seq(chatUser, chatCall, chatToolA, chatUser), missingCallB, "messages.[1].role"},
		{"a call unanswered at the end", seq(chatUser, chatCall, chatToolA), missingCallB, "messages.[1].role"},
		{"no answer at all", seq(`{"role":"system","content":"s"}`, chatUser, chatCall, chatText),
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
				"The following tool_call_ids did not have response messages: call_a, call_b", "messages.[2].role"},
		{"an answer after a user message", seq(chatUser, chatCall, chatToolA, chatUser, chatToolB), missingCallB, "messages.[1].role"},
		{"a tool message first", seq(chatToolA, chatUser), strayTool, "messages.[0].role"},
		{"a tool message after plain text", seq(chatUser, chatText, chatToolA), strayTool, "messages.[2].role"},
		{"an answer to a call of an earlier message", seq(chatUser, chatCall, chatToolA, chatToolB, chatText,
			`{"role":"assistant","tool_calls":[{"id":"call_c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, chatToolA),
			"Invalid parameter: 'tool_call_id' of 'call_a' not found in 'tool_calls' of previous message.", "messages.[6].tool_call_id"},
	}
	checkHistory(t, cases,
		func(h string) string { return `{"model":"m","stream":true,"messages":[` + h + `]}` },
		func(b []byte) *historyError { return chatHistoryError(parseOpenAI(t, b)) })
}

const (
	respUser  = `{"role":"user","content":"hi"}`
	respCallA = `{"type":"function_call","call_id":"call_a","name":"f","arguments":"{}"}`
	respCallB = `{"type":"function_call","call_id":"call_b","name":"g","arguments":"{}"}`
	respOutA  = `{"type":"function_call_output","call_id":"call_a","output":"1"}`
	respOutB  = `{"type":"function_call_output","call_id":"call_b","output":"2"}`
	respText  = `{"role":"assistant","content":"done"}`
)

func TestResponsesHistoryRules(t *testing.T) {
	seq := func(items ...string) string { return `[` + strings.Join(items, ",") + `]` }
	noOutputB := "No tool output found for function call call_b."
	noCallA := "No tool call found for function call output with call_id call_a."
	cases := []historyCase{
		{"a string input", `"hi"`, "", ""},
		{"calls answered", seq(respUser, respCallA, respCallB, respOutB, respOutA, respText, respUser), "", ""},
		{"an answer after other items", seq(respUser, respCallA, respText, respUser, respOutA), "", ""},
		{"a call never answered", seq(respUser, respCallA, respCallB, respOutA, respUser), noOutputB, "input"},
		{"a call last", seq(respUser, respCallA, respOutA, respCallB), noOutputB, "input"},
		{"an output with no call", seq(respUser, respOutA), noCallA, "input"},
		{"an output before its call", seq(respUser, respOutA, respCallA), noCallA, "input"},
		{"two outputs for one call", seq(respUser, respCallA, respOutA, respOutA), noCallA, "input"},
	}
	checkHistory(t, cases,
		func(h string) string { return `{"model":"m","stream":true,"input":` + h + `}` },
		func(b []byte) *historyError { return responsesHistoryError(parseOpenAI(t, b)) })

	// A continuation of a stored response may answer calls the fake cannot
	// see, but its own calls still need their outputs.
	cont := func(h string) string {
		return `{"model":"m","stream":true,"previous_response_id":"resp_1","input":` + h + `}`
	}
	checkHistory(t, []historyCase{
		{"an output for a stored call", seq(respOutA), "", ""},
		{"a new call unanswered", seq(respOutA, respCallB), noOutputB, "input"},
	}, cont, func(b []byte) *historyError { return responsesHistoryError(parseOpenAI(t, b)) })
}

const (
	antUser  = `{"role":"user","content":"hi"}`
	antCall  = `{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"toolu_a","name":"f","input":{}},{"type":"tool_use","id":"toolu_b","name":"g","input":{}}]}`
	antResA  = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"1"}]}`
	antResB  = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_b","content":"2"}]}`
	antBoth  = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_b"},{"type":"tool_result","tool_use_id":"toolu_a"},{"type":"text","text":"and?"}]}`
	antReply = `{"role":"assistant","content":"done"}`
)

func TestAnthropicHistoryRules(t *testing.T) {
	seq := func(msgs ...string) string { return strings.Join(msgs, ",") }
	missing := func(n, ids string) string {
		return "messages." + n + ": `tool_use` ids were found without `tool_result` blocks immediately after: " + ids +
			". Each `tool_use` block must have a corresponding `tool_result` block in the next message."
	}
	stray := func(at, id string) string {
		return "messages." + at + ": unexpected `tool_use_id` found in `tool_result` blocks: " + id +
			". Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
	}
	cases := []historyCase{
		{"no tools", seq(antUser, antReply, antUser), "", ""},
		{"results in one message, in any order", seq(antUser, antCall, antBoth, antReply), "", ""},
		{"results split over consecutive user messages", seq(antUser, antCall, antResA, antResB, antReply, antUser), "", ""},
		{"consecutive assistant messages", seq(antUser, antReply, antCall, antBoth), "", ""},
		{"a result missing", seq(antUser, antCall, antResA, antReply), missing("1", "toolu_b"), ""},
		{"no result before plain text", seq(antUser, antCall, antUser), missing("1", "toolu_a, toolu_b"), ""},
		{"a call last", seq(antUser, antCall), missing("1", "toolu_a, toolu_b"), ""},
		{"a result after a later turn", seq(antUser, antCall, antResA, antReply, antResB), missing("1", "toolu_b"), ""},
		{"the unanswered call in the second merged message", seq(antUser, antReply,
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_c","name":"f","input":{}}]}`, antUser), missing("2", "toolu_c"), ""},
		{"a result first", seq(antResA), stray("0.content.0", "toolu_a"), ""},
		{"a result after text, merged", seq(antUser, antReply, antUser, antResA), stray("3.content.0", "toolu_a"), ""},
		{"a result for an earlier turn's call", seq(antUser, antCall, antBoth, antReply, antResA), stray("4.content.0", "toolu_a"), ""},
		{"a stray result among good ones", seq(antUser, antCall,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a"},{"type":"tool_result","tool_use_id":"toolu_b"},{"type":"tool_result","tool_use_id":"toolu_z"}]}`),
			stray("2.content.2", "toolu_z"), ""},
	}
	checkHistory(t, cases,
		func(h string) string { return `{"model":"m","max_tokens":10,"stream":true,"messages":[` + h + `]}` },
		anthropicHistoryError)
}

// TestRejectionAnswers checks the 400 each fake sends for a bad history on
// the wire: the API's error body, the log entry marked Rejected, and the
// scripted turn left for the next request.
func TestRejectionAnswers(t *testing.T) {
	type fake interface {
		Push(...Turn)
		Requests() []Request
		Rejections() []string
	}
	cases := []struct {
		name    string
		start   func(t *testing.T) (fake, string)
		headers map[string]string
		bad     string
		good    string
		// body decodes an error answer into message, type and param; ok
		// reports whether it has the API's shape.
		body func(data []byte) (message, typ, param string, ok bool)
	}{
		{
			name:    "chat",
			start:   func(t *testing.T) (fake, string) { f := NewOpenAIChat(t); return f, f.URL + "/chat/completions" },
			headers: map[string]string{"Authorization": "Bearer k"},
			bad:     `{"model":"m","stream":true,"messages":[` + chatUser + `,` + chatCall + `,` + chatToolA + `]}`,
			good:    `{"model":"m","stream":true,"messages":[` + chatUser + `]}`,
			body:    openaiErrorFields,
		},
		{
			name:    "responses",
			start:   func(t *testing.T) (fake, string) { f := NewOpenAIResponses(t); return f, f.URL + "/responses" },
			headers: map[string]string{"Authorization": "Bearer k"},
			bad:     `{"model":"m","stream":true,"input":[` + respUser + `,` + respCallA + `,` + respCallB + `,` + respOutA + `]}`,
			good:    `{"model":"m","stream":true,"input":"hi"}`,
			body:    openaiErrorFields,
		},
		{
			name:    "anthropic",
			start:   func(t *testing.T) (fake, string) { f := NewAnthropic(t); return f, f.URL + "/v1/messages" },
			headers: map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"},
			bad:     `{"model":"m","max_tokens":10,"stream":true,"messages":[` + antUser + `,` + antCall + `,` + antResA + `]}`,
			good:    `{"model":"m","max_tokens":10,"stream":true,"messages":[` + antUser + `]}`,
			body: func(data []byte) (string, string, string, bool) {
				var b struct {
					Type  string `json:"type"`
					Error struct {
						Type    string `json:"type"`
						Message string `json:"message"`
					} `json:"error"`
				}
				err := json.Unmarshal(data, &b)
				return b.Error.Message, b.Error.Type, "", err == nil && b.Type == "error"
			},
		},
	}
	want := map[string]struct{ message, param string }{
		"chat":      {missingCallB, "messages.[1].role"},
		"responses": {"No tool output found for function call call_b.", "input"},
		"anthropic": {"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_b. " +
			"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, url := c.start(t)
			f.Push(Turn{Text: "hello"})
			post := func(body string) *http.Response {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range c.headers {
					req.Header.Set(k, v)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { res.Body.Close() })
				return res
			}

			res := post(c.bad)
			var data json.RawMessage
			if err := json.NewDecoder(res.Body).Decode(&data); err != nil {
				t.Fatal(err)
			}
			msg, typ, param, ok := c.body(data)
			w := want[c.name]
			if res.StatusCode != http.StatusBadRequest || !ok || typ != "invalid_request_error" || msg != w.message || param != w.param {
				t.Errorf("status %d, body %s\nwant 400 invalid_request_error %q (param %q)", res.StatusCode, data, w.message, w.param)
			}
			if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Errorf("content type %q", res.Header.Get("Content-Type"))
			}
			if got := f.Rejections(); len(got) != 1 || got[0] != w.message {
				t.Errorf("rejections %q, want the one message", got)
			}

			// The refusal used no turn: the next, valid request streams it.
			res = post(c.good)
			if res.StatusCode != http.StatusOK {
				t.Errorf("the valid request got status %d", res.StatusCode)
			}
			reqs := f.Requests()
			if len(reqs) != 2 || reqs[0].Rejected != w.message || reqs[1].Rejected != "" {
				t.Errorf("log %+v", reqs)
			}
		})
	}
}

// openaiErrorFields decodes an OpenAI error body, which must hold exactly
// message, type, param and code, code null for these refusals.
func openaiErrorFields(data []byte) (string, string, string, bool) {
	var b struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &b) != nil || len(b.Error) != 4 || string(b.Error["code"]) != "null" {
		return "", "", "", false
	}
	var msg, typ, param string
	if json.Unmarshal(b.Error["message"], &msg) != nil || json.Unmarshal(b.Error["type"], &typ) != nil || json.Unmarshal(b.Error["param"], &param) != nil {
		return "", "", "", false
	}
	return msg, typ, param, true
}
