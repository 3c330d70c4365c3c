package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The facade rows' model: a minimal OpenAI Chat Completions server on a
// loopback port, which parley's openai provider and the bench's own client
// both call. (internal/llm/llmtest has a fuller fake, but it needs a
// testing.TB and records every request: it is for tests.)
//
// It answers every request at once, from the request alone, so that calls
// through parley and direct calls get the same answer: a request whose last
// message is a tool result gets the text fakeFinal; a request whose last
// user message contains fakeCallWord gets a call of the server-side tool
// noop with arguments {}; any other gets the text fakeText. Streamed
// ("stream": true) as data-only server-sent events of
// chat.completion.chunk objects: the assistant role, the text (one chunk)
// or the call (one chunk with its id, name and arguments), the
// finish_reason, with stream_options.include_usage a usage chunk, then
// [DONE]; otherwise one chat.completion object.
const (
	fakeCallWord = "noop"
	fakeText     = "ok"
	fakeFinal    = "done"
	fakeCallID   = "call_noop"
)

// fakeModel is a running fake; stop closes it.
type fakeModel struct {
	url   string // base URL, for the SDK's option.WithBaseURL
	calls atomic.Int64
	stop  func()
}

func startFakeModel() (*fakeModel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake model: listen: %w", err)
	}
	f := &fakeModel{url: "http://" + ln.Addr().String() + "/v1"}
	s := &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(ln)
	f.stop = func() { s.Close() }
	return f, nil
}

// fakeRequest is what the fake reads of a request.
type fakeRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}`, http.StatusNotFound)
		return
	}
	var req fakeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":"messages","code":null}}`, fmt.Sprint("bad request: ", err))
		return
	}
	n := f.calls.Add(1)
	last := req.Messages[len(req.Messages)-1]
	text, call := fakeText, false
	switch {
	case last.Role == "tool":
		text = fakeFinal
	case last.Role == "user" && strings.Contains(string(last.Content), fakeCallWord):
		call = true
	}
	id := fmt.Sprintf("chatcmpl-bench%d", n)
	created := time.Now().Unix()
	usage := map[string]any{"prompt_tokens": len(req.Messages), "completion_tokens": 1, "total_tokens": len(req.Messages) + 1}
	finish := "stop"
	var message map[string]any
	toolCall := map[string]any{"id": fakeCallID, "type": "function", "function": map[string]any{"name": "noop", "arguments": "{}"}}
	if call {
		finish = "tool_calls"
		message = map[string]any{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": []any{toolCall}}
	} else {
		message = map[string]any{"role": "assistant", "content": text, "refusal": nil}
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": message, "logprobs": nil, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	chunk := func(choices []any, u any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": choices}
		if req.StreamOptions.IncludeUsage {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}
	chunk(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	if call {
		toolCall["index"] = 0
		chunk(delta(map[string]any{"tool_calls": []any{toolCall}}, nil), nil)
	} else {
		chunk(delta(map[string]any{"content": text}, nil), nil)
	}
	chunk(delta(map[string]any{}, finish), nil)
	if req.StreamOptions.IncludeUsage {
		chunk([]any{}, usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}
