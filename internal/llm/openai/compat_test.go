package openai_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/llm"
	"github.com/parleyhq/parley/internal/llm/openai"
)

// Streams that the llmtest fakes do not script: the variants of
// OpenAI-compatible servers, and the rarer events of the Responses API.

// rawServer answers every request with body as an event stream.
func rawServer(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func chatAt(url string) llm.Provider {
	return openai.NewChat(openai.Config{Model: "local", BaseURL: url})
}

func responsesAt(url string) llm.Provider {
	return openai.NewResponses(openai.Config{Model: "local", BaseURL: url})
}

func TestChatCompatibleServerVariants(t *testing.T) {
	// Ollama style: "reasoning" in the delta, every call at index 0 with its
	// own id, finish_reason "stop" despite the calls, no usage chunk.
	url := rawServer(t, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Hm."}}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}}]}}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"b","arguments":""}}]}}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`)
	res, events, err := stream(t, chatAt(url), hello)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	want := []chat.Part{
		{Type: chat.PartReasoning, Text: "Hm."},
		{Type: chat.PartToolCall, ToolCallID: "call_a", ToolName: "a", Args: json.RawMessage(`{"x":1}`)},
		{Type: chat.PartToolCall, ToolCallID: "call_b", ToolName: "b", Args: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(res.Parts, want) || res.FinishReason != "tool_calls" || res.Usage != (llm.Usage{}) {
		t.Fatalf("result = %+v", res)
	}
	var starts []int
	for _, e := range events {
		if e.Type == llm.ToolCallStart {
			starts = append(starts, e.Index)
		}
	}
	if !reflect.DeepEqual(starts, []int{0, 1}) {
		t.Errorf("starts at %v, want [0 1]: %+v", starts, events)
	}
}

func TestChatFinishReasons(t *testing.T) {
	url := rawServer(t, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Once upon"}}]}

data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}

data: [DONE]

`)
	res, _, err := stream(t, chatAt(url), hello)
	if err != nil || res.FinishReason != "length" {
		t.Fatalf("result %+v, err %v", res, err)
	}

	// A body that ends cleanly before any finish_reason was cut somewhere.
	url = rawServer(t, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Once upon"}}]}

`)
	_, _, err = stream(t, chatAt(url), hello)
	if e := llmError(t, err); e.Kind != "cut_stream" || !e.Retryable {
		t.Fatalf("error = %+v", e)
	}
}

func TestResponsesEvents(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		kind      string
		retryable bool
		message   string
	}{
		{
			name: "error event, flat as documented",
			body: "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Slow down.\",\"param\":null,\"sequence_number\":1}\n\n",
			kind: "rate_limited", retryable: true, message: "Slow down.",
		},
		{
			name: "response.failed",
			body: "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"Boom.\"},\"output\":[]}}\n\n",
			kind: "server", retryable: true, message: "Boom.",
		},
		{
			name: "no terminal event",
			body: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n",
			kind: "cut_stream", retryable: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := stream(t, responsesAt(rawServer(t, c.body)), hello)
			e := llmError(t, err)
			if e.Kind != c.kind || e.Retryable != c.retryable || (c.message != "" && e.Message != c.message) || e.Provider != "openai-responses" {
				t.Fatalf("error = %+v", e)
			}
		})
	}
}

func TestResponsesIncomplete(t *testing.T) {
	url := rawServer(t, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"Once upon\"}\n\n"+
		"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"sequence_number\":2,\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"output\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":16,\"total_tokens\":19}}}\n\n")
	res, _, err := stream(t, responsesAt(url), hello)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if res.FinishReason != "length" || res.Parts[0].Text != "Once upon" || res.Usage != (llm.Usage{InputTokens: 3, OutputTokens: 16}) {
		t.Fatalf("result = %+v", res)
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, p := range []llm.Provider{chatAt("http://" + addr + "/v1"), responsesAt("http://" + addr + "/v1")} {
		_, _, err := stream(t, p, hello)
		if e := llmError(t, err); e.Kind != "connection" || !e.Retryable || e.HTTPStatus != 0 {
			t.Errorf("error = %+v", e)
		}
	}
}
