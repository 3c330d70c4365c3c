package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/parleyhq/parley/internal/llm"
)

// classify turns an error of a call to provider into an *llm.Error; the end
// of ctx itself is returned as ctx's error, so callers see a cancellation.
func classify(ctx context.Context, provider string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return statusError(provider, apiErr)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(streamErr.Event.Data, &body)
		code, _ := body.Error.Code.(string)
		return eventError(provider, code, body.Error.Type, body.Error.Message, err)
	}
	var urlErr *url.Error
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &urlErr):
		// The request never got an answer: refused, reset, DNS, TLS.
		return &llm.Error{Kind: "connection", Provider: provider, Retryable: true, Message: err.Error(), Err: err}
	case errors.As(err, &syntaxErr), errors.As(err, &typeErr), errors.Is(err, bufio.ErrTooLong):
		return &llm.Error{Kind: "bad_response", Provider: provider, Message: "malformed stream: " + err.Error(), Err: err}
	}
	// What is left failed while reading the body: the stream was cut.
	return cutStream(provider, err)
}

// cutStream is the error of a stream that ended before its terminal event.
func cutStream(provider string, err error) *llm.Error {
	msg := "the stream ended before the answer was complete"
	if err != nil {
		msg += ": " + err.Error()
	}
	return &llm.Error{Kind: "cut_stream", Provider: provider, Retryable: true, Message: msg, Err: err}
}

// statusError classifies an HTTP error answer by its status and error code,
// honouring x-should-retry and Retry-After when the server sends them. A
// prompt too long for the model's context window is never retried: the same
// request would fail again.
func statusError(provider string, e *sdk.Error) *llm.Error {
	code, typ, msg := e.Code, e.Type, e.Message
	if msg == "" {
		code, typ, msg = topLevelError(e)
	}
	kind, retryable := statusKind(e.StatusCode, code, typ, msg)
	var retryAfter time.Duration
	if e.Response != nil {
		switch e.Response.Header.Get("x-should-retry") {
		case "true":
			retryable = kind != llm.KindContextLength
		case "false":
			retryable = false
		}
		retryAfter = llm.ParseRetryAfter(e.Response.Header, time.Now())
	}
	if msg == "" {
		msg = http.StatusText(e.StatusCode)
	}
	return &llm.Error{
		Kind: kind, Provider: provider, HTTPStatus: e.StatusCode,
		Retryable: retryable, RetryAfter: retryAfter, Message: msg, Err: e,
	}
}

// topLevelError reads the code, type and message of an error body that does
// not nest them in an "error" object, as some OpenAI-compatible servers
// (older vLLM) write it: {"object":"error","message":...,"code":400}. The
// SDK keeps the body readable for this; it is put back for later readers.
func topLevelError(e *sdk.Error) (code, typ, message string) {
	if e.Response == nil || e.Response.Body == nil {
		return "", "", ""
	}
	data, _ := io.ReadAll(io.LimitReader(e.Response.Body, 1<<20))
	e.Response.Body = io.NopCloser(bytes.NewReader(data))
	var body struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	if json.Unmarshal(data, &body) != nil {
		return "", "", ""
	}
	if body.Code != nil {
		code = fmt.Sprint(body.Code)
	}
	return code, body.Type, body.Message
}

// statusKind maps an HTTP status (and OpenAI error code, type and message)
// to a kind and whether a later attempt may succeed.
func statusKind(status int, code, typ, message string) (string, bool) {
	switch {
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests && contextLength(code, typ, message):
		return llm.KindContextLength, false
	case status == http.StatusTooManyRequests && code == "insufficient_quota":
		return "quota", false
	case status == http.StatusTooManyRequests:
		return "rate_limited", true
	case status == http.StatusRequestTimeout:
		return "timeout", true
	case status == http.StatusConflict:
		return "conflict", true
	case status == http.StatusUnauthorized:
		return "auth", false
	case status == http.StatusForbidden:
		return "permission", false
	case status == http.StatusNotFound:
		return "not_found", false
	case status == http.StatusServiceUnavailable || status == 529:
		return "overloaded", true
	case status >= 500:
		return "server", true
	}
	return "bad_request", false
}

// contextLength reports whether an error says the prompt does not fit the
// model's context window: OpenAI's code (Chat Completions and Responses),
// llama.cpp's type, or the wording of OpenAI-compatible servers that send
// no such code (vLLM, DeepSeek, OpenRouter, Mistral: "maximum context
// length"; llama.cpp: "exceeds the available context size").
func contextLength(code, typ, message string) bool {
	if code == "context_length_exceeded" || typ == "exceed_context_size_error" {
		return true
	}
	m := strings.ToLower(message)
	return strings.Contains(m, "maximum context length") ||
		strings.Contains(m, "exceeds the context window") ||
		strings.Contains(m, "exceeds the available context size")
}

// eventError is an error the server sent inside a 200 stream, classified by
// its code or type.
func eventError(provider, code, typ, message string, err error) *llm.Error {
	kind, retryable := "provider_error", false
	switch {
	case contextLength(code, typ, message):
		kind = llm.KindContextLength
	case code == "insufficient_quota":
		kind = "quota"
	case code == "rate_limit_exceeded" || code == "too_many_requests" || typ == "requests" || typ == "tokens" || typ == "too_many_requests":
		kind, retryable = "rate_limited", true
	case code == "overloaded" || code == "server_overloaded" || code == "service_unavailable" || typ == "overloaded_error":
		kind, retryable = "overloaded", true
	case code == "server_error" || code == "internal_error" || typ == "server_error":
		kind, retryable = "server", true
	case typ == "invalid_request_error":
		kind = "bad_request"
	}
	if message == "" {
		message = "error event in the stream"
		if code != "" {
			message += ": " + code
		}
	}
	return &llm.Error{Kind: kind, Provider: provider, Retryable: retryable, Message: message, Err: err}
}
