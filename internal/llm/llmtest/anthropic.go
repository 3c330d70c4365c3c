package llmtest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Anthropic is a fake Anthropic Messages API: POST /v1/messages answers each
// request with the next scripted Turn, streamed as the real API streams.
//
// A turn streams message_start, then one content block per piece in order
// (Reasoning as a thinking block with thinking_delta chunks and a closing
// signature_delta; Text as a text block; each ToolCall as a tool_use block
// whose input arrives as input_json_delta chunks after an empty one), a ping
// after the first block opens, message_delta with the stop_reason and output
// usage, and message_stop.
//
// A turn with an error Status answers with that status, the real error body
// ({"type":"error","error":{"type":...,"message":...}}) and, with RetryAfter,
// a retry-after header in whole seconds. With CutAfter as well, the error
// comes mid-stream instead, as the real API sends it: after CutAfter events
// of a 200 stream, an "event: error" with the same body, and the stream ends.
// CutAfter alone drops the connection after that many events, with no
// terminating chunk. FirstChunkDelay holds back the first event (after the
// 200 headers; before an error answer), ending early if the client goes away.
// Gate holds the turn back until the test closes it, and Started and Gone
// tell the test when the turn began and when its client left (see Turn).
//
// Malformed images and files are refused as the API refuses them (see
// content.go); a malformed structured output
// format, as the API refuses it (see format.go). Messages whose tool calls and results do not pair up are refused as the
// API refuses them, with HTTP 400 invalid_request_error: a tool_use block
// without a tool_result block in the next turn ("messages.N: `tool_use` ids
// were found without `tool_result` blocks immediately after: ..."), or a
// tool_result block answering no tool_use block of the turn before it
// ("messages.N.content.M: unexpected `tool_use_id` found in `tool_result`
// blocks: ..."). Consecutive messages of one role count as one turn, as the
// API merges them (see Script).
//
// Usage reports the scripted counts, or else the estimates (PromptTokens,
// OutputTokens). With a context window (SetContextWindow), a request over it
// is refused with HTTP 400 invalid_request_error "prompt is too long: P
// tokens > W maximum".
type Anthropic struct {
	*Script
	URL string // base URL for the SDK (option.WithBaseURL)

	ids atomic.Int64
}

// NewAnthropic starts a fake Anthropic server, closed when t ends.
func NewAnthropic(t testing.TB) *Anthropic {
	f := &Anthropic{Script: &Script{t: t}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// serve answers one request.
func (f *Anthropic) serve(w http.ResponseWriter, r *http.Request) {
	n := f.ids.Add(1)
	w.Header().Set("request-id", fmt.Sprintf("req_fake%06d", n))
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		anthropicError(w, http.StatusNotFound, "Not found", 0)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	authorized := r.Header.Get("x-api-key") != "" || r.Header.Get("Authorization") != ""
	versioned := r.Header.Get("anthropic-version") != ""
	logged := Request{Header: r.Header.Clone(), Body: body, At: time.Now()}
	var bad *historyError
	if authorized && versioned && json.Valid(body) {
		bad = cmp.Or(anthropicFormatError(body), anthropicContentError(body), anthropicHistoryError(body))
		logged.PromptTokens = anthropicPromptTokens(body)
	}
	if bad != nil {
		logged.Rejected = bad.message
	}
	turn, ok, window := f.next(&logged)
	if ok {
		turn.begin()
	}
	switch {
	case !authorized:
		anthropicError(w, http.StatusUnauthorized, "x-api-key header is required", 0)
		return
	case !versioned:
		anthropicError(w, http.StatusBadRequest, "anthropic-version: header is required", 0)
		return
	case !json.Valid(body):
		anthropicError(w, http.StatusBadRequest, "There was an issue with the request body: invalid JSON", 0)
		return
	case bad != nil:
		anthropicError(w, http.StatusBadRequest, bad.message, 0)
		return
	case logged.OverWindow:
		anthropicError(w, http.StatusBadRequest, fmt.Sprintf("prompt is too long: %d tokens > %d maximum", logged.PromptTokens, window), 0)
		return
	case !ok:
		anthropicError(w, http.StatusInternalServerError, "llmtest: no scripted turn left", 0)
		return
	}
	failed := turn.failed()
	if failed && turn.CutAfter == 0 {
		if !waitFor(r, turn.FirstChunkDelay) || !turn.waitGate(r) {
			turn.away()
			return
		}
		anthropicError(w, turn.Status, turn.ErrorMessage, turn.RetryAfter)
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &req)

	flusher, ok := startStream(w, r, turn.FirstChunkDelay)
	if !ok {
		turn.away()
		return
	}
	turn.Usage = turn.usage(logged.PromptTokens)
	evs := anthropicEvents(turn, req.Model, fmt.Sprintf("msg_fake%06d", n))
	gate := turn.gateAt(len(evs))
	for i, ev := range evs {
		if i == gate && !turn.waitGate(r) {
			turn.away()
			return
		}
		if turn.CutAfter > 0 && i == turn.CutAfter {
			if failed {
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", anthropicErrorBody(turn.Status, turn.ErrorMessage))
				flusher.Flush()
				return
			}
			panic(http.ErrAbortHandler) // drop the connection without ending the chunked body
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
		flusher.Flush()
	}
}

// anthropicSSE is one server-sent event.
type anthropicSSE struct {
	name string
	data string
}

// anthropicEvents is the whole stream of a successful turn.
func anthropicEvents(t Turn, model, id string) []anthropicSSE {
	var evs []anthropicSSE
	add := func(name string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		evs = append(evs, anthropicSSE{name, string(data)})
	}
	type obj = map[string]any
	add("message_start", obj{"type": "message_start", "message": obj{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": obj{
			"input_tokens": t.Usage.InputTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
			"output_tokens": min(t.Usage.OutputTokens, 1), "service_tier": "standard",
		},
	}})
	index := 0
	block := func(start obj, deltas []obj) {
		add("content_block_start", obj{"type": "content_block_start", "index": index, "content_block": start})
		if index == 0 {
			add("ping", obj{"type": "ping"})
		}
		for _, d := range deltas {
			add("content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": d})
		}
		add("content_block_stop", obj{"type": "content_block_stop", "index": index})
		index++
	}
	if t.Reasoning != "" {
		var deltas []obj
		for _, c := range Chunks(t.Reasoning, t.ChunkSize) {
			deltas = append(deltas, obj{"type": "thinking_delta", "thinking": c})
		}
		sig := base64.StdEncoding.EncodeToString([]byte("llmtest signature of " + t.Reasoning))
		deltas = append(deltas, obj{"type": "signature_delta", "signature": sig})
		block(obj{"type": "thinking", "thinking": "", "signature": ""}, deltas)
	}
	if t.Text != "" {
		var deltas []obj
		for _, c := range Chunks(t.Text, t.ChunkSize) {
			deltas = append(deltas, obj{"type": "text_delta", "text": c})
		}
		block(obj{"type": "text", "text": ""}, deltas)
	}
	for i, c := range t.ToolCalls {
		callID := c.ID
		if callID == "" {
			callID = fmt.Sprintf("toolu_fake%02d", i)
		}
		deltas := []obj{{"type": "input_json_delta", "partial_json": ""}}
		for _, p := range Chunks(c.Args, t.ChunkSize) {
			deltas = append(deltas, obj{"type": "input_json_delta", "partial_json": p})
		}
		block(obj{"type": "tool_use", "id": callID, "name": c.Name, "input": obj{}}, deltas)
	}
	stop := "end_turn"
	if len(t.ToolCalls) > 0 {
		stop = "tool_use"
	}
	add("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": stop, "stop_sequence": nil},
		"usage": obj{"output_tokens": t.Usage.OutputTokens}})
	add("message_stop", obj{"type": "message_stop"})
	return evs
}

// anthropicError writes the API's error answer.
func anthropicError(w http.ResponseWriter, status int, message string, retryAfter time.Duration) {
	if retryAfter > 0 {
		w.Header().Set("retry-after", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(anthropicErrorBody(status, message))
}

// anthropicErrorBody is the API's error object for status.
func anthropicErrorBody(status int, message string) []byte {
	typ, msg := anthropicErrorType(status)
	if message != "" {
		msg = message
	}
	body, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": msg},
	})
	return body
}

// anthropicErrorType is the error type and default message the API uses
// for status.
func anthropicErrorType(status int) (string, string) {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error", "invalid x-api-key"
	case http.StatusPaymentRequired:
		return "billing_error", "Your credit balance is too low to access the Anthropic API."
	case http.StatusForbidden:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case http.StatusNotFound:
		return "not_found_error", "The requested resource could not be found."
	case http.StatusRequestEntityTooLarge:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case http.StatusTooManyRequests:
		return "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."
	case http.StatusGatewayTimeout:
		return "timeout_error", "Request timed out."
	case 529:
		return "overloaded_error", "Overloaded"
	}
	if status >= 500 {
		return "api_error", "Internal server error"
	}
	return "invalid_request_error", "Invalid request."
}
