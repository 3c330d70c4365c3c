package llmtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// The bodies the fakes answer a request over their context window with,
// byte for byte as the APIs send them (the SDK tests decode them).

func TestContextWindowErrorBodies(t *testing.T) {
	// "abcdefghi": 9 characters, 3 tokens.
	cases := []struct {
		name  string
		start func(t *testing.T) (*Script, string)
		body  string
		want  string
	}{
		{
			name: "chat completions",
			start: func(t *testing.T) (*Script, string) {
				f := NewOpenAIChat(t)
				return f.Script, f.URL + "/chat/completions"
			},
			body: `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"abcdefghi"}]}`,
			want: `{"error":{"message":"This model's maximum context length is 2 tokens. However, your messages resulted in 3 tokens. Please reduce the length of the messages.",` +
				`"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
		},
		{
			name: "responses",
			start: func(t *testing.T) (*Script, string) {
				f := NewOpenAIResponses(t)
				return f.Script, f.URL + "/responses"
			},
			body: `{"model":"gpt-test","stream":true,"input":[{"role":"user","content":"abcdefghi"}]}`,
			want: `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.",` +
				`"type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
		},
		{
			name:  "anthropic",
			start: func(t *testing.T) (*Script, string) { f := NewAnthropic(t); return f.Script, f.URL + "/v1/messages" },
			body:  `{"model":"claude-test","stream":true,"max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"abcdefghi"}]}]}`,
			want:  `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 3 tokens > 2 maximum"}}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, url := c.start(t)
			s.SetContextWindow(2)
			s.Push(Turn{Text: "unused"})
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer k")
			req.Header.Set("x-api-key", "k")
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			data, _ := io.ReadAll(res.Body)
			var got, want any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("body %s: %v", data, err)
			}
			_ = json.Unmarshal([]byte(c.want), &want)
			if res.StatusCode != http.StatusBadRequest || !reflect.DeepEqual(got, want) {
				t.Errorf("HTTP %d %s, want 400 %s", res.StatusCode, data, c.want)
			}
			if reqs := s.Requests(); len(reqs) != 1 || !reqs[0].OverWindow || reqs[0].PromptTokens != 3 {
				t.Errorf("requests %+v, want one over the window with 3 prompt tokens", reqs)
			}
			if len(s.turns) != 1 {
				t.Errorf("%d turns left, want the one pushed: a refused request uses none", len(s.turns))
			}
		})
	}
}
