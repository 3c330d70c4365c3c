package openai_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/internal/llm"
)

// The error bodies servers send for a prompt longer than the model's
// context window, served through the real SDK clients.

// errorServer answers every request with status and body, counting them.
func errorServer(t *testing.T, status int, body string) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", &n
}

// checkContextLength asserts err is a context-length error of provider,
// and that a retrying provider made one request only.
func checkContextLength(t *testing.T, err error, provider string, status int, message string) {
	t.Helper()
	e := llmError(t, err)
	if e.Kind != llm.KindContextLength || e.Retryable || e.HTTPStatus != status || e.Provider != provider {
		t.Errorf("error = %+v, want a %s not retryable, HTTP %d, from %s", e, llm.KindContextLength, status, provider)
	}
	if e.Message != message {
		t.Errorf("message = %q, want %q", e.Message, message)
	}
	if !llm.IsContextLength(err) {
		t.Errorf("IsContextLength(%v) = false", err)
	}
}

func TestContextLengthHTTPErrors(t *testing.T) {
	const (
		chatMessage      = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."
		responsesMessage = "Your input exceeds the context window of this model. Please adjust your input and try again."
		vllmMessage      = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4900 in the messages, 100 in the completion). Please reduce the length of the messages or completion."
		llamaMessage     = "the request exceeds the available context size, try increasing it"
	)
	cases := []struct {
		name, body, message string
		provider            func(url string) llm.Provider
		providerName        string
	}{
		{
			name:         "chat completions",
			body:         `{"error":{"message":"` + chatMessage + `","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			message:      chatMessage,
			provider:     chatAt,
			providerName: "openai",
		},
		{
			name:         "responses",
			body:         `{"error":{"message":"` + responsesMessage + `","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
			message:      responsesMessage,
			provider:     responsesAt,
			providerName: "openai-responses",
		},
		{
			name:         "compatible server without a code",
			body:         `{"error":{"message":"` + vllmMessage + `","type":"invalid_request_error","param":null,"code":null}}`,
			message:      vllmMessage,
			provider:     chatAt,
			providerName: "openai",
		},
		{
			name:         "vLLM, numeric code",
			body:         `{"error":{"message":"` + vllmMessage + `","type":"BadRequestError","param":null,"code":400}}`,
			message:      vllmMessage,
			provider:     chatAt,
			providerName: "openai",
		},
		{
			name:         "older vLLM, error not nested",
			body:         `{"object":"error","message":"` + vllmMessage + `","type":"BadRequestError","param":null,"code":400}`,
			message:      vllmMessage,
			provider:     chatAt,
			providerName: "openai",
		},
		{
			name:         "llama.cpp",
			body:         `{"error":{"code":400,"message":"` + llamaMessage + `","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`,
			message:      llamaMessage,
			provider:     chatAt,
			providerName: "openai",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url, requests := errorServer(t, http.StatusBadRequest, c.body)
			_, events, err := stream(t, c.provider(url), hello)
			checkContextLength(t, err, c.providerName, http.StatusBadRequest, c.message)
			if len(events) != 0 {
				t.Errorf("events %+v", events)
			}

			var r retrier
			_, _, err = stream(t, r.wrap(c.provider(url), 0), hello)
			checkContextLength(t, err, c.providerName, http.StatusBadRequest, c.message)
			if len(r.retries) != 0 || requests.Load() != 2 {
				t.Errorf("retries %+v, %d requests in all; want none and 2 (one per call)", r.retries, requests.Load())
			}
		})
	}
}

func TestOtherBadRequestsAreNotContextLength(t *testing.T) {
	url, _ := errorServer(t, http.StatusBadRequest,
		`{"error":{"message":"Invalid value for 'messages'.","type":"invalid_request_error","param":"messages","code":null}}`)
	_, _, err := stream(t, chatAt(url), hello)
	if e := llmError(t, err); e.Kind != "bad_request" || llm.IsContextLength(err) {
		t.Errorf("error = %+v, want bad_request", e)
	}
}

func TestContextLengthInStream(t *testing.T) {
	const message = "Your input exceeds the context window of this model. Please adjust your input and try again."
	cases := []struct {
		name, body   string
		provider     func(url string) llm.Provider
		providerName string
	}{
		{
			name: "responses, response.failed",
			body: "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"error\":null,\"output\":[]}}\n\n" +
				"event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"failed\"," +
				"\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"" + message + "\"},\"output\":[]}}\n\n",
			provider:     responsesAt,
			providerName: "openai-responses",
		},
		{
			name:         "responses, error event",
			body:         "event: error\ndata: {\"type\":\"error\",\"sequence_number\":0,\"code\":\"context_length_exceeded\",\"message\":\"" + message + "\",\"param\":\"input\"}\n\n",
			provider:     responsesAt,
			providerName: "openai-responses",
		},
		{
			name:         "chat completions, error chunk",
			body:         "data: {\"error\":{\"message\":\"" + message + "\",\"type\":\"invalid_request_error\",\"param\":\"messages\",\"code\":\"context_length_exceeded\"}}\n\n",
			provider:     chatAt,
			providerName: "openai",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := rawServer(t, c.body)
			var r retrier
			_, events, err := stream(t, r.wrap(c.provider(url), 0), hello)
			checkContextLength(t, err, c.providerName, 0, message)
			if len(events) != 0 || len(r.retries) != 0 {
				t.Errorf("events %+v, retries %+v", events, r.retries)
			}
		})
	}
}

func TestContextLengthNotRetriedEvenIfTheServerSaysSo(t *testing.T) {
	const message = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages."
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-should-retry", "true")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"` + message + `","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`))
	}))
	t.Cleanup(srv.Close)
	var r retrier
	_, _, err := stream(t, r.wrap(chatAt(srv.URL+"/v1"), 0), hello)
	checkContextLength(t, err, "openai", http.StatusBadRequest, message)
	if len(r.retries) != 0 || n.Load() != 1 {
		t.Errorf("retries %+v, %d requests; want none and 1", r.retries, n.Load())
	}
}
