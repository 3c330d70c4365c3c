package facade

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// OpenAI's error types.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeNotFound       = "not_found_error"
	typeConflict       = "conflict_error"
	typeRateLimit      = "requests" // OpenAI's type of a request rate limit
	typeQuota          = "insufficient_quota"
	typeServer         = "server_error"
)

// apiError is an error as an OpenAI client reads it:
// {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    any     `json:"code"` // a string, or null
	// RetryAfter, when positive, is sent as the Retry-After header
	// (seconds), which OpenAI's SDKs wait for before they retry.
	RetryAfter int64 `json:"-"`
	// NoRetry tells OpenAI's SDKs not to retry (x-should-retry: false): a
	// budget does not come back within their retries.
	NoRetry bool `json:"-"`
}

func (e *apiError) Error() string { return e.Type + ": " + e.Message }

// invalid is a 400 about one request field; param "" (the whole body) is
// sent as null.
func invalid(param, format string, args ...any) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = &param
	}
	return e
}

// modelNotFound is OpenAI's answer for a model it does not serve: a name
// that is neither a configured model nor "agent:<name>" of an agent the
// owner may run.
func modelNotFound(name string) *apiError {
	p := "model"
	what := "one of parley's configured models"
	if strings.HasPrefix(name, agentPrefix) {
		what = "an agent of yours or of parley's configuration"
	}
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: &p, Code: "model_not_found",
		Message: fmt.Sprintf("The model %q does not exist: it is not %s (GET /v1/models lists them).", name, what)}
}

// toAPIError maps any error a handler returns to what the client sees.
func toAPIError(err error) *apiError {
	var (
		ae  *apiError
		ve  *chat.ValidationError
		um  *service.UnknownModelError
		se  *service.StatusError
		sc  *store.StatusConflictError
		ids *service.IDMismatchError
		dl  *service.DeadlineError
		re  *quota.RateError
		ee  *quota.ExceededError
		ce  *quota.CapError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &re):
		return &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "rate_limit_exceeded",
			Message: "Rate limit reached: " + re.Error(), RetryAfter: re.RetryAfterSeconds()}
	case errors.As(err, &ee):
		return &apiError{Status: http.StatusTooManyRequests, Type: typeQuota, Code: "insufficient_quota", NoRetry: true,
			Message: "You exceeded your current quota: " + ee.Error()}
	case errors.As(err, &ce):
		return &apiError{Status: http.StatusTooManyRequests, Type: typeQuota, Code: "insufficient_quota", NoRetry: true,
			Message: "You exceeded your current quota: " + ce.Error()}
	case errors.As(err, &um):
		return modelNotFound(um.Model)
	case errors.As(err, &ve):
		return invalid(requestParam(ve.Field), "%s", ve.Error())
	case errors.As(err, &ids):
		return invalid("messages", "%s", ids.Error())
	case errors.As(err, &dl):
		return deadlinePassed(dl)
	case errors.As(err, &se):
		return &apiError{Status: http.StatusConflict, Type: typeConflict, Message: se.Error()}
	case errors.As(err, &sc):
		return &apiError{Status: http.StatusConflict, Type: typeConflict,
			Message: fmt.Sprintf("the conversation's chat is %s; send the request again", sc.Status)}
	case errors.Is(err, store.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Type: typeNotFound, Message: "chat not found"}
	case errors.Is(err, store.ErrUnavailable):
		return &apiError{Status: http.StatusServiceUnavailable, Type: typeServer,
			Message: "the database is unavailable for a moment; try again"}
	case errors.Is(err, context.Canceled):
		return &apiError{Status: 499, Type: typeInvalidRequest, Message: "the request was canceled"}
	}
	return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Message: "internal server error"}
}

// deadlinePassed is the 409 of results that came after the deadline of
// the chat's calls, before parley answered them in the client's place:
// nothing of the request is written, and the chat goes on without them.
func deadlinePassed(dl *service.DeadlineError) *apiError {
	return &apiError{Status: http.StatusConflict, Type: typeConflict, Code: "deadline_passed",
		Message: fmt.Sprintf("the deadline for the results of parley chat %s's calls passed at %s: parley answers them without these results (the model is told none came) and the chat goes on",
			dl.ChatID, dl.Deadline.UTC().Format(time.RFC3339Nano))}
}

// requestParam names the request field a service validation error is
// about: the chat's dynamic tools are the request's tools.
func requestParam(field string) string {
	if rest, ok := strings.CutPrefix(field, "dynamic_tools"); ok {
		rest = strings.Replace(rest, ".name", ".function.name", 1)
		rest = strings.Replace(rest, ".input_schema", ".function.parameters", 1)
		return "tools" + rest
	}
	if strings.HasPrefix(field, "history") {
		return "messages"
	}
	return field
}

// writeError answers with err in OpenAI's error shape.
func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(ae.RetryAfter, 10))
	}
	if ae.NoRetry {
		w.Header().Set("X-Should-Retry", "false")
	}
	writeJSON(w, ae.Status, map[string]*apiError{"error": ae})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, status = []byte(`{"error":{"message":"internal server error","type":"server_error","param":null,"code":null}}`), http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
