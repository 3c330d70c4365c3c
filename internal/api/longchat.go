package api

import (
	"net/http"
	"strconv"

	"github.com/parleyhq/parley/internal/chat"
)

// compact answers POST /api/v1/chats/{id}/compact: 202, the chat pending
// with a compaction asked of its run.
func (a *api) compact(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	c, err := a.svc.Compact(r.Context(), owner, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, c)
	return nil
}

// regenerate answers POST /api/v1/chats/{id}/regenerate: the chat, pending
// to answer its last user message again.
func (a *api) regenerate(w http.ResponseWriter, r *http.Request, owner string) error {
	return a.answerChat(w, r, func(id string) (chat.Chat, error) {
		return a.svc.Regenerate(r.Context(), owner, id)
	})
}

// editMessage answers PATCH /api/v1/chats/{id}/messages/{message_id} with
// {"content": ...} (or "message"): the chat, pending to answer the edited
// message.
func (a *api) editMessage(w http.ResponseWriter, r *http.Request, owner string) error {
	msgID, err := messageID(r)
	if err != nil {
		return err
	}
	var req postMessageRequest
	if err := a.decode(w, r, &req); err != nil {
		return err
	}
	content, _, err := req.text()
	if err != nil {
		return err
	}
	if !given(content) {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
			Message: `"content" is required: the message's new content`, Details: map[string]any{"field": "content"}}
	}
	return a.answerChat(w, r, func(id string) (chat.Chat, error) {
		return a.svc.EditMessage(r.Context(), owner, id, msgID, content)
	})
}

// messageVersions answers GET /api/v1/chats/{id}/messages/{message_id}/versions:
// {"versions": [Message...]}, the message's versions oldest first.
func (a *api) messageVersions(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	msgID, err := messageID(r)
	if err != nil {
		return err
	}
	msgs, err := a.svc.MessageVersions(r.Context(), owner, id, msgID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"versions": msgs})
	return nil
}

// messageID is the request path's message_id; a 400 unless a positive
// integer.
func messageID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("message_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, &apiError{Status: http.StatusBadRequest, Code: "invalid_path",
			Message: "message_id must be a message's id, a positive integer", Details: map[string]any{"param": "message_id"}}
	}
	return id, nil
}

// forkRequest is the body of POST /api/v1/chats/{id}/fork.
type forkRequest struct {
	MessageID int64 `json:"message_id"`
}

// fork answers POST /api/v1/chats/{id}/fork: 201, the new chat.
func (a *api) fork(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	var req forkRequest
	if err := a.decode(w, r, &req); err != nil {
		return err
	}
	if req.MessageID <= 0 {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
			Message: `"message_id" is required: the id of the last message the fork keeps`, Details: map[string]any{"field": "message_id"}}
	}
	c, err := a.svc.Fork(r.Context(), owner, id, req.MessageID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}
