package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// Page sizes of the list routes.
const (
	defaultChatPage    = 50
	defaultMessagePage = 100
)

// badQuery is a 400 about one query parameter.
func badQuery(param, format string, args ...any) error {
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_query",
		Message: param + ": " + fmt.Sprintf(format, args...), Details: map[string]any{"param": param}}
}

// parseChatQuery reads the filters of GET /api/v1/chats: status (comma
// separated), label=k:v (repeatable, all must match), archived (false by
// default, true, any), limit and cursor. Label filters are checked like
// labels, within lim.
func parseChatQuery(v url.Values, lim chat.Limits) (store.ChatQuery, error) {
	var q store.ChatQuery
	for _, list := range v["status"] {
		for s := range strings.SplitSeq(list, ",") {
			st := chat.Status(strings.TrimSpace(s))
			if !st.Valid() {
				return q, badQuery("status", "%q is not a status; want any of %v", st, chat.Statuses)
			}
			q.Statuses = append(q.Statuses, st)
		}
	}
	for _, l := range v["label"] {
		k, val, ok := strings.Cut(l, ":")
		if !ok || k == "" {
			return q, badLabel(l, "want label=key:value")
		}
		if old, dup := q.Labels[k]; dup && old != val {
			return q, badLabel(l, fmt.Sprintf("label %q is filtered on twice with different values", k))
		}
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[k] = val
	}
	if err := chat.ValidateLabels(q.Labels, lim); err != nil {
		return q, badLabel(strings.Join(v["label"], ","), err.Error())
	}
	archived := false
	q.Archived = &archived
	switch a := v.Get("archived"); a {
	case "", "false":
	case "true":
		archived = true
	case "any":
		q.Archived = nil
	default:
		return q, badQuery("archived", "%q: want false (the default), true or any", a)
	}
	limit, err := parseLimit(v.Get("limit"), defaultChatPage)
	if err != nil {
		return q, err
	}
	q.Limit = limit
	q.Cursor = v.Get("cursor")
	return q, nil
}

func badLabel(filter, why string) error {
	return &apiError{Status: http.StatusBadRequest, Code: "bad_label_filter",
		Message: fmt.Sprintf("label filter %q: %s", filter, why), Details: map[string]any{"param": "label"}}
}

// parseLimit reads a page size between 1 and store.MaxPageSize.
func parseLimit(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > store.MaxPageSize {
		return 0, badQuery("limit", "%q: want an integer from 1 to %d", s, store.MaxPageSize)
	}
	return n, nil
}

// parseAfter reads a message id cursor; "" is 0, the start.
func parseAfter(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, badQuery("after", "%q: want a message id", s)
	}
	return n, nil
}
