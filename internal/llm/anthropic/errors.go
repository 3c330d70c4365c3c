package anthropic

import (
	"errors"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/parleyhq/parley/internal/llm"
)

// classify turns a failed call into an *llm.Error. streaming says the HTTP
// answer had arrived, so a failure that is not an API error cut the stream
// rather than the connection.
func classify(err error, streaming bool) *llm.Error {
	var api *sdk.Error
	if !errors.As(err, &api) {
		if streaming {
			return &llm.Error{Kind: "cut_stream", Provider: ProviderName, Retryable: true, Message: err.Error(), Err: err}
		}
		return &llm.Error{Kind: "connection", Provider: ProviderName, Retryable: true, Message: err.Error(), Err: err}
	}
	e := &llm.Error{Provider: ProviderName, Message: api.Message, Err: err}
	if api.StatusCode >= 400 {
		// An error event inside a 200 stream has no HTTP status of its own.
		e.HTTPStatus = api.StatusCode
		if api.Response != nil {
			e.RetryAfter = llm.ParseRetryAfter(api.Response.Header, time.Now())
		}
	}
	if e.Message == "" {
		e.Message = api.RawJSON()
	}
	e.Kind, e.Retryable = kind(string(api.Type()), e.HTTPStatus)
	if e.Kind == "bad_request" && contextLength(e.Message) {
		e.Kind = llm.KindContextLength
	}
	return e
}

// contextLength reports whether an invalid request's message says the
// prompt does not fit the model's context window: "prompt is too long:
// 208310 tokens > 200000 maximum", or "input length and `max_tokens` exceed
// context limit: ..." when the prompt fits but leaves too little room for
// the answer. The API has no code for either, so the wording is matched.
func contextLength(message string) bool {
	m := strings.ToLower(message)
	return strings.Contains(m, "prompt is too long") || strings.Contains(m, "exceed context limit")
}

// kind maps the API's error type, or else the HTTP status, to an llm.Error
// kind and whether a later attempt may succeed.
func kind(errType string, status int) (string, bool) {
	switch errType {
	case "overloaded_error":
		return "overloaded", true
	case "rate_limit_error":
		return "rate_limited", true
	case "api_error":
		return "server", true
	case "timeout_error":
		return "timeout", true
	case "authentication_error", "permission_error":
		return "auth", false
	case "invalid_request_error", "not_found_error", "request_too_large", "billing_error":
		return "bad_request", false
	}
	switch {
	case status == 529:
		return "overloaded", true
	case status == http.StatusTooManyRequests:
		return "rate_limited", true
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return "timeout", true
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "auth", false
	case status >= 500 || status == 0:
		return "server", true // status 0: an unknown error event mid-stream
	}
	return "bad_request", false
}
