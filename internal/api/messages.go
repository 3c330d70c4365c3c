package api

import (
	"encoding/json"
	"net/http"

	"github.com/parleyhq/parley/internal/chat"
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
	msgs, err := a.svc.ListMessages(r.Context(), owner, id, after, limit)
	if err != nil {
		return err
	}
	if msgs == nil {
		msgs = []chat.Message{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
	return nil
}

// postMessageRequest is the body of POST /api/v1/chats/{id}/messages.
type postMessageRequest struct {
	Content json.RawMessage `json:"content"`
	Busy    chat.BusyMode   `json:"busy"`
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
	res, err := a.svc.PostMessage(r.Context(), owner, id, req.Content, req.Busy)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, res)
	return nil
}
