package llmtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// These tests read the OpenAI fakes' bytes directly, without the SDK, to
// pin down the wire format; the openai package tests them through the SDK.

type openaiSSEEvent struct {
	name string
	data string
}

// post sends body to url with a bearer key and returns the response.
func openaiPost(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// readSSE parses an event stream, returning its events and the read error
// that ended it (nil at a clean end).
func openaiReadSSE(r io.Reader) ([]openaiSSEEvent, error) {
	var evs []openaiSSEEvent
	var cur openaiSSEEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				evs = append(evs, cur)
			}
			cur = openaiSSEEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			return evs, errors.New("unexpected line " + line)
		}
	}
	return evs, sc.Err()
}

func TestOpenAIChatWireFormat(t *testing.T) {
	f := NewOpenAIChat(t)
	turn := Turn{Reasoning: "hm", Text: "Hello", ToolCalls: []ToolCall{{ID: "call_1", Name: "f", Args: `{"a":1}`}}, Usage: Usage{InputTokens: 3, OutputTokens: 4}}
	f.Push(turn, turn)

	for _, includeUsage := range []bool{true, false} {
		body := `{"model":"gpt-x","stream":true}`
		if includeUsage {
			body = `{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true}}`
		}
		res := openaiPost(t, context.Background(), f.URL+"/chat/completions", body)
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
		}
		evs, err := openaiReadSSE(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if last := evs[len(evs)-1]; last.data != "[DONE]" || last.name != "" {
			t.Fatalf("last event %+v, want data: [DONE]", last)
		}
		var finish []string
		var usage json.RawMessage
		var id string
		for _, ev := range evs[:len(evs)-1] {
			var c struct {
				ID      string           `json:"id"`
				Object  string           `json:"object"`
				Model   string           `json:"model"`
				Choices []map[string]any `json:"choices"`
			}
			if err := json.Unmarshal([]byte(ev.data), &c); err != nil || ev.name != "" {
				t.Fatalf("event %+v: %v", ev, err)
			}
			var keys map[string]json.RawMessage
			_ = json.Unmarshal([]byte(ev.data), &keys)
			if id == "" {
				id = c.ID
			}
			if c.Object != "chat.completion.chunk" || c.ID != id || c.Model != "gpt-x" {
				t.Errorf("chunk %s", ev.data)
			}
			if _, has := keys["usage"]; has != includeUsage {
				t.Errorf("usage key present = %v with include_usage %v: %s", has, includeUsage, ev.data)
			}
			if u := keys["usage"]; u != nil && string(u) != "null" {
				usage = u
				if len(c.Choices) != 0 {
					t.Errorf("the usage chunk must have empty choices: %s", ev.data)
				}
			}
			for _, ch := range c.Choices {
				if r, ok := ch["finish_reason"].(string); ok {
					finish = append(finish, r)
				}
			}
		}
		if len(finish) != 1 || finish[0] != "tool_calls" {
			t.Errorf("finish reasons %v", finish)
		}
		if includeUsage && !strings.Contains(string(usage), `"prompt_tokens":3,"completion_tokens":4,"total_tokens":7`) {
			t.Errorf("usage %s", usage)
		}
		if !includeUsage && usage != nil {
			t.Errorf("usage sent without include_usage: %s", usage)
		}
	}
	if got := f.Requests(); len(got) != 2 || got[0].Header.Get("Authorization") != "Bearer k" || !strings.Contains(string(got[1].Body), `"gpt-x"`) {
		t.Errorf("requests %+v", got)
	}
}

func TestOpenAIResponsesWireFormat(t *testing.T) {
	f := NewOpenAIResponses(t)
	turn := Turn{Reasoning: "hm", Text: "Hello", ToolCalls: []ToolCall{{ID: "call_1", Name: "f", Args: `{"a":1}`}}, Usage: Usage{InputTokens: 3, OutputTokens: 4}}
	f.Push(turn, turn)
	for _, summary := range []bool{true, false} {
		body := `{"model":"gpt-x","stream":true,"instructions":"Be brief."}`
		if summary {
			body = `{"model":"gpt-x","stream":true,"reasoning":{"summary":"auto"}}`
		}
		res := openaiPost(t, context.Background(), f.URL+"/responses", body)
		evs, err := openaiReadSSE(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for i, ev := range evs {
			var e struct {
				Type     string `json:"type"`
				Sequence int    `json:"sequence_number"`
			}
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
				t.Fatalf("event %+v: %v", ev, err)
			}
			if e.Type != ev.name || e.Sequence != i {
				t.Errorf("event %d named %q has type %q and sequence_number %d", i, ev.name, e.Type, e.Sequence)
			}
			names = append(names, ev.name)
		}
		if names[0] != "response.created" || names[len(names)-1] != "response.completed" {
			t.Errorf("events %v", names)
		}
		if got := strings.Contains(strings.Join(names, " "), "response.reasoning_summary_text.delta"); got != summary {
			t.Errorf("summary deltas sent = %v when asked = %v", got, summary)
		}
		last := evs[len(evs)-1].data
		for _, want := range []string{`"status":"completed"`, `"input_tokens":3`, `"output_tokens":4`, `"call_id":"call_1"`, `"arguments":"{\"a\":1}"`} {
			if !strings.Contains(last, want) {
				t.Errorf("response.completed lacks %s: %s", want, last)
			}
		}
		if !summary && !strings.Contains(evs[0].data, `"instructions":"Be brief."`) {
			t.Errorf("the response should echo the instructions: %s", evs[0].data)
		}
	}
}

func TestOpenAIErrorAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		url  func(f *OpenAIChat) string
		auth bool
		turn *Turn
		code int
		typ  string
	}{
		{"scripted 429", func(f *OpenAIChat) string { return f.URL + "/chat/completions" }, true, &Turn{Status: 429, RetryAfter: 1500 * time.Millisecond}, 429, "requests"},
		{"no turn left", func(f *OpenAIChat) string { return f.URL + "/chat/completions" }, true, nil, 500, "server_error"},
		{"no key", func(f *OpenAIChat) string { return f.URL + "/chat/completions" }, false, &Turn{Text: "x"}, 401, "invalid_request_error"},
		{"wrong path", func(f *OpenAIChat) string { return f.URL + "/completions" }, true, nil, 404, "invalid_request_error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := NewOpenAIChat(t)
			if c.turn != nil {
				f.Push(*c.turn)
			}
			req, _ := http.NewRequest(http.MethodPost, c.url(f), strings.NewReader(`{"model":"m","stream":true}`))
			if c.auth {
				req.Header.Set("Authorization", "Bearer k")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body struct {
				Error map[string]any `json:"error"`
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != c.code || body.Error["type"] != c.typ || body.Error["message"] == "" {
				t.Errorf("status %d, body %v", res.StatusCode, body)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := body.Error[k]; !ok {
					t.Errorf("error body lacks %q: %v", k, body)
				}
			}
			if c.code == 429 && (res.Header.Get("Retry-After") != "2" || res.Header.Get("Retry-After-Ms") != "1500") {
				t.Errorf("retry headers %v", res.Header)
			}
		})
	}
}

func TestOpenAICutAndDelay(t *testing.T) {
	f := NewOpenAIResponses(t)
	f.Push(Turn{Text: "Hello world", CutAfter: 3})
	res := openaiPost(t, context.Background(), f.URL+"/responses", `{"model":"m","stream":true}`)
	evs, err := openaiReadSSE(res.Body)
	if len(evs) != 3 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%d events, err %v; want 3 then an unexpected EOF", len(evs), err)
	}

	// A slow first chunk ends early when the client goes away, so the
	// server's Close at cleanup does not wait for the delay.
	f.Push(Turn{Text: "late", FirstChunkDelay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res = openaiPost(t, ctx, f.URL+"/responses", `{"model":"m","stream":true}`)
	evs, err = openaiReadSSE(res.Body)
	if len(evs) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%d events, err %v", len(evs), err)
	}
}
