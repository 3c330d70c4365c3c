package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// apiError is an error as the client sees it.
type apiError struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int64 `json:"-"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// statusClientClosed is logged and counted when the client went away before
// the answer (nginx's convention); the client never sees it.
const statusClientClosed = 499

// toAPIError maps any error a handler returns to what the client sees. It is
// the one place where domain errors get their status codes.
func toAPIError(err error) *apiError {
	var (
		ae     *apiError
		ve     *chat.ValidationError
		um     *service.UnknownModelError
		busy   *service.BusyError
		se     *service.StatusError
		sc     *store.StatusConflictError
		ids    *service.IDMismatchError
		args   *service.ArgsError
		out    *service.OutputError
		ut     *service.UnavailableToolError
		dl     *service.DeadlineError
		me     *service.MessageError
		ntc    *service.NothingToCompactError
		rate   *quota.RateError
		over   *quota.ExceededError
		capErr *quota.CapError
		fb     *service.ForbiddenError
		uo     *service.UnknownOwnerError
	)
	if fe := fileError(err); fe != nil {
		return fe
	}
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, auth.ErrUnauthorized):
		return &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: auth.ErrUnauthorized.Error()}
	case errors.As(err, &rate):
		return &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: rate.Error(),
			RetryAfter: rate.RetryAfterSeconds(), Details: map[string]any{"retry_after_seconds": rate.RetryAfterSeconds()}}
	case errors.As(err, &over):
		return &apiError{Status: http.StatusTooManyRequests, Code: "spend_limit_exceeded", Message: over.Error(),
			RetryAfter: quota.CeilSeconds(time.Until(over.ResetsAt)),
			Details: map[string]any{"limit": over.Limit, "spent": over.Spent, "period": over.Period,
				"resets_at": over.ResetsAt.UTC(), "unit": over.Unit}}
	case errors.As(err, &capErr):
		code := "quota_exceeded"
		if capErr.Key == "max_streams" {
			code = "too_many_streams"
		}
		return &apiError{Status: http.StatusTooManyRequests, Code: code, Message: capErr.Error(),
			Details: map[string]any{"quota": capErr.Key, "limit": capErr.Limit}}
	case errors.As(err, &fb):
		return &apiError{Status: http.StatusForbidden, Code: "forbidden", Message: fb.Error()}
	case errors.As(err, &uo):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: uo.Error(),
			Details: map[string]any{"owner": uo.Owner}}
	case errors.Is(err, store.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "chat not found"}
	case errors.As(err, &ve):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field", Message: ve.Error(),
			Details: map[string]any{"field": ve.Field}}
	case errors.As(err, &um):
		return &apiError{Status: http.StatusBadRequest, Code: "unknown_model", Message: um.Error(),
			Details: map[string]any{"field": "model", "model": um.Model, "models": um.Known}}
	case errors.As(err, &busy):
		return &apiError{Status: http.StatusConflict, Code: "chat_busy",
			Message: fmt.Sprintf("the chat is %s; send with busy \"queue\" or \"interrupt\", or wait", busy.Status),
			Details: map[string]any{"status": busy.Status}}
	case errors.As(err, &se):
		return &apiError{Status: http.StatusConflict, Code: "status_conflict", Message: se.Error(),
			Details: map[string]any{"status": se.Status}}
	case errors.As(err, &sc):
		return &apiError{Status: http.StatusConflict, Code: "status_conflict",
			Message: fmt.Sprintf("the chat is %s; read it again and retry", sc.Status),
			Details: map[string]any{"status": sc.Status}}
	case errors.As(err, &me):
		return &apiError{Status: me.Status, Code: me.Code, Message: me.Message, Details: map[string]any{"message_id": me.MessageID}}
	case errors.As(err, &ntc):
		return &apiError{Status: http.StatusConflict, Code: "nothing_to_compact", Message: ntc.Error()}
	case errors.As(err, &dl):
		return &apiError{Status: http.StatusConflict, Code: "deadline_passed", Message: dl.Error(),
			Details: map[string]any{"deadline": dl.Deadline}}
	case errors.As(err, &ut):
		return &apiError{Status: http.StatusConflict, Code: "tool_unavailable", Message: ut.Error(),
			Details: map[string]any{"tool": ut.Tool}}
	case errors.As(err, &args):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_args", Message: args.Error(),
			Details: map[string]any{"tool_call_id": args.ToolCallID}}
	case errors.As(err, &out):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_output", Message: out.Error(),
			Details: map[string]any{"tool_call_id": out.ToolCallID, "error": out.Err.Error()}}
	case errors.As(err, &ids):
		code := "invalid_tool_results"
		if ids.Kind == chat.ActionApproval {
			code = "invalid_decisions"
		}
		return &apiError{Status: http.StatusBadRequest, Code: code, Message: ids.Error(),
			Details: map[string]any{"missing": nonNil(ids.Missing), "unknown": nonNil(ids.Unknown), "duplicate": nonNil(ids.Duplicate)}}
	case errors.Is(err, store.ErrBadCursor):
		return &apiError{Status: http.StatusBadRequest, Code: "bad_cursor", Message: "cursor is not one this server issued; start again without it",
			Details: map[string]any{"param": "cursor"}}
	case errors.Is(err, store.ErrExists):
		return &apiError{Status: http.StatusConflict, Code: "conflict", Message: "already exists"}
	case errors.Is(err, context.Canceled):
		return &apiError{Status: statusClientClosed, Code: "canceled", Message: "the request was canceled"}
	case errors.Is(err, store.ErrUnavailable):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Message: "the database is unavailable for a moment; try again"}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal server error"}
}

// writeError answers with err's error body and remembers err for the
// request's log line.
func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	if sw, ok := w.(interface{ setErr(error) }); ok {
		sw.setErr(err)
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(ae.RetryAfter, 10))
	}
	writeJSON(w, ae.Status, map[string]*apiError{"error": ae})
}

// writeJSON answers with v as JSON, which browsers must not sniff as
// anything else (a chat's text is the client's, and could look like HTML).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, status = []byte(`{"error":{"code":"internal","message":"internal server error"}}`), http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (w *statusWriter) setErr(err error) { w.err = err }

// muxErrorWriter turns the ServeMux's plain-text 404 and 405 answers into the
// API's error body; other answers (redirects) pass through.
type muxErrorWriter struct {
	*statusWriter
	r       *http.Request
	replace bool
}

func (w *muxErrorWriter) WriteHeader(code int) {
	switch code {
	case http.StatusNotFound:
		w.replace = true
		writeError(w.statusWriter, &apiError{Status: code, Code: "not_found",
			Message: fmt.Sprintf("no route %s %s", w.r.Method, w.r.URL.Path)})
	case http.StatusMethodNotAllowed:
		w.replace = true
		allow := w.Header().Get("Allow")
		writeError(w.statusWriter, &apiError{Status: code, Code: "method_not_allowed",
			Message: fmt.Sprintf("method %s is not allowed on %s; allowed: %s", w.r.Method, w.r.URL.Path, allow),
			Details: map[string]any{"allow": strings.Split(allow, ", ")}})
	default:
		w.statusWriter.WriteHeader(code)
	}
}

func (w *muxErrorWriter) Write(b []byte) (int, error) {
	if w.replace {
		return len(b), nil
	}
	return w.statusWriter.Write(b)
}

// nonNil keeps an empty id list an array in the error body.
func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}
