package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/service"
)

func (a *api) listMessages(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	after, err := parseAfter(q.Get("after"))
	if err != nil {
		return err
	}
	limit, err := parseLimit(q.Get("limit"), defaultMessagePage)
	if err != nil {
		return err
	}
	list := a.svc.ListMessages
	switch q.Get("superseded") {
	case "", "false":
	case "true":
		list = a.svc.ListEveryMessage
	default:
		return badQuery("superseded", "%q: want true or false", q.Get("superseded"))
	}
	msgs, err := list(r.Context(), owner, id, after, limit)
	if err != nil {
		return err
	}
	if msgs == nil {
		msgs = []chat.Message{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
	return nil
}

// listQueued answers GET /api/v1/chats/{id}/queued: the messages waiting
// in the chat's queue, so a client that reloads still shows them.
func (a *api) listQueued(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	q, err := a.svc.ListQueued(r.Context(), owner, id)
	if err != nil {
		return err
	}
	if q == nil {
		q = []chat.QueuedMessage{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"queued": q})
	return nil
}

// postMessageRequest is the body of POST /api/v1/chats/{id}/messages. The
// message is "message", as in POST /api/v1/chats; "content" is its older
// name, still taken.
type postMessageRequest struct {
	Message json.RawMessage `json:"message"`
	Content json.RawMessage `json:"content"`
	Busy    chat.BusyMode   `json:"busy"`
	// ResponseFormat asks the final answer of this message's turn as JSON
	// valid against a schema (service.Post).
	ResponseFormat *chat.ResponseFormat `json:"response_format"`
}

// text returns the message and the name of the field that carried it: one
// of the two names, or both when they hold the same JSON value. Both with
// different values is an error naming them.
func (req postMessageRequest) text() (json.RawMessage, string, error) {
	msg, content := given(req.Message), given(req.Content)
	switch {
	case msg && content:
		var a, b any
		if json.Unmarshal(req.Message, &a) != nil || json.Unmarshal(req.Content, &b) != nil || !reflect.DeepEqual(a, b) {
			return nil, "", &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
				Message: `"message" and "content" are two names of the same field ("content" is the older one) and they differ here: send one of them`,
				Details: map[string]any{"field": "message", "fields": []string{"message", "content"}}}
		}
		return req.Message, "message", nil
	case msg:
		return req.Message, "message", nil
	}
	return req.Content, "content", nil
}

// given reports whether a field was in the body with a value other than null.
func given(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

func (a *api) postMessage(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	var req postMessageRequest
	if err := a.decode(w, r, &req); err != nil {
		return err
	}
	content, field, err := req.text()
	if err != nil {
		return err
	}
	res, err := a.svc.Post(r.Context(), owner, id, service.Post{Content: content, Busy: req.Busy, ResponseFormat: req.ResponseFormat})
	var ve *chat.ValidationError
	if field != "content" && errors.As(err, &ve) && strings.HasPrefix(ve.Field, "content") {
		// The service names the message "content": name the request's field.
		err = &chat.ValidationError{Field: field + strings.TrimPrefix(ve.Field, "content"), Message: ve.Message}
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, res)
	return nil
}
