package api

import (
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
)

// chatID returns the {id} of the path; anything that is not a UUID names no
// chat, so it is a 404 like a missing one.
func chatID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil {
		return "", store.ErrNotFound
	}
	return id, nil
}

func (a *api) createChat(w http.ResponseWriter, r *http.Request, owner string) error {
	var in service.NewChat
	if err := a.decode(w, r, &in); err != nil {
		return err
	}
	c, err := a.svc.Create(r.Context(), owner, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, createdChat{Chat: c.Chat, Warnings: c.Warnings})
	return nil
}

// createdChat is the body of a 201 to POST /api/v1/chats: the chat, and
// "warnings" when the request had something to warn of.
type createdChat struct {
	chat.Chat
	Warnings []string `json:"warnings,omitempty"`
}

// chatList is the body of GET /api/v1/chats.
type chatList struct {
	Chats      []chat.Chat `json:"chats"`
	NextCursor string      `json:"next_cursor"`
}

func (a *api) listChats(w http.ResponseWriter, r *http.Request, owner string) error {
	q, err := parseChatQuery(r.URL.Query(), a.cfg.Limits.Chat())
	if err != nil {
		return err
	}
	page, err := a.svc.ListChats(r.Context(), owner, q)
	if err != nil {
		return err
	}
	if page.Chats == nil {
		page.Chats = []chat.Chat{}
	}
	writeJSON(w, http.StatusOK, chatList{Chats: page.Chats, NextCursor: page.NextCursor})
	return nil
}

func (a *api) getChat(w http.ResponseWriter, r *http.Request, owner string) error {
	return a.answerChat(w, r, func(id string) (chat.Chat, error) {
		return a.svc.GetChat(r.Context(), owner, id)
	})
}

func (a *api) patchChat(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	var p service.ChatPatch
	if err := a.decode(w, r, &p); err != nil {
		return err
	}
	c, err := a.svc.UpdateChat(r.Context(), owner, id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (a *api) deleteChat(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	if err := a.svc.DeleteChat(r.Context(), owner, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) interrupt(w http.ResponseWriter, r *http.Request, owner string) error {
	return a.answerChat(w, r, func(id string) (chat.Chat, error) {
		return a.svc.Interrupt(r.Context(), owner, id)
	})
}

func (a *api) retry(w http.ResponseWriter, r *http.Request, owner string) error {
	return a.answerChat(w, r, func(id string) (chat.Chat, error) {
		return a.svc.Retry(r.Context(), owner, id)
	})
}

// answerChat runs op on the path's chat and answers the chat it returns.
func (a *api) answerChat(w http.ResponseWriter, r *http.Request, op func(id string) (chat.Chat, error)) error {
	id, err := chatID(r)
	if err != nil {
		return err
	}
	c, err := op(id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// toolResultsRequest is the body of POST /api/v1/chats/{id}/tool-results.
type toolResultsRequest struct {
	Results []service.ToolResult `json:"results"`
}

// approvalsRequest is the body of POST /api/v1/chats/{id}/approvals.
type approvalsRequest struct {
	Decisions []service.Decision `json:"decisions"`
}

// submitApprovals records a person's decisions on the calls of a
// requires_action chat that wait for approval, as the owner and the name of
// the token that authenticated the request.
func (a *api) submitApprovals(w http.ResponseWriter, r *http.Request, owner string) error {
	var req approvalsRequest
	if err := a.decode(w, r, &req); err != nil {
		return err
	}
	by := service.Decider{Owner: owner}
	if id, ok := r.Context().Value(tokenIDKey{}).(string); ok {
		tok, err := a.svc.Token(r.Context(), id)
		if err != nil {
			return fmt.Errorf("read the deciding token: %w", err)
		}
		by.Token = tok.Name
	}
	return a.answerChat(w, r, func(id string) (chat.Chat, error) {
		return a.svc.SubmitApprovals(r.Context(), by, id, req.Decisions)
	})
}

// submitToolResults answers a requires_action chat's dynamic tool calls.
func (a *api) submitToolResults(w http.ResponseWriter, r *http.Request, owner string) error {
	var req toolResultsRequest
	if err := a.decode(w, r, &req); err != nil {
		return err
	}
	return a.answerChat(w, r, func(id string) (chat.Chat, error) {
		return a.svc.SubmitToolResults(r.Context(), owner, id, req.Results)
	})
}
