package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/chattx"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// An app chat id is the id a client app (an AI SDK useChat) knows its
// conversation by: the id of one of the owner's parley chats, or any other
// string, which the app's first message binds to a chat created for it
// (store.BindAppChat: one app id, one chat).

// ErrAppChatMoved refuses a PostAppMessage whose app chat id names another
// chat than the caller expected: a concurrent first request bound it
// meanwhile. Nothing was written; look the id up again and repeat.
var ErrAppChatMoved = errors.New("the app chat id was bound to another chat meanwhile")

// AppChatID returns the id of the owner's chat an app chat id names: the
// owner's chat with that parley id, or the chat bound to it.
// store.ErrNotFound when it names none yet, or another owner's chat.
func (s *Service) AppChatID(ctx context.Context, owner, appID string) (string, error) {
	id, err := appChat(ctx, s.st, owner, appID)
	if err == nil && id == "" {
		err = fmt.Errorf("chat %q: %w", appID, store.ErrNotFound)
	}
	return id, err
}

// appChat resolves an app chat id: the chat's id, or "" when it names no
// chat yet and a new one may be bound to it; store.ErrNotFound when it is
// another owner's chat id, which no request of this owner may take.
func appChat(ctx context.Context, r store.Reader, owner, appID string) (string, error) {
	if _, err := uuid.Parse(appID); err == nil {
		c, err := r.GetChat(ctx, appID)
		switch {
		case err == nil && c.Owner == owner:
			return c.ID, nil
		case err == nil:
			return "", fmt.Errorf("chat %s: %w", appID, store.ErrNotFound)
		case !errors.Is(err, store.ErrNotFound):
			return "", fmt.Errorf("resolve app chat %q: %w", appID, err)
		}
	}
	id, err := r.AppChat(ctx, owner, appID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("resolve app chat %q: %w", appID, err)
	}
	return id, nil
}

// PostAppMessage posts a user message to the chat an owner's app chat id
// names, chatID (as PostMessage with chat.BusyQueue), or, when the id
// names no chat yet, creates chatID with in and the message as its first,
// bound to the app id: the lookup and the write are one transaction.
// Everything is checked before anything is written (the message, its
// files, the owner's budget and chat cap, and in for a new chat): a
// refused request writes nothing. The caller picks chatID, a new chat's
// id, before the call (it may subscribe to the chat's events first);
// ErrAppChatMoved when the app id names another chat than chatID.
// Another owner's parley chat id is store.ErrNotFound.
func (s *Service) PostAppMessage(ctx context.Context, owner, appID, chatID string, content json.RawMessage, in NewChat) (PostResult, error) {
	parts, err := s.checkPost(ctx, owner, content)
	if err != nil {
		return PostResult{}, fmt.Errorf("post message to app chat %q: %w", appID, err)
	}
	in.Message = nil
	fresh, _, invalid := s.newChatFrom(ctx, owner, in) // refused only if it must be created
	fresh.ID, fresh.Status = chatID, chat.Pending
	if fresh.Title == "" {
		fresh.Title = chat.FallbackTitle(parts, s.limits().MaxTitleBytes)
	}
	var res PostResult
	err = s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		id, err := appChat(ctx, tx, owner, appID)
		switch {
		case err != nil:
			return err
		case id == chatID:
			res, err = s.post(ctx, tx, n, owner, id, parts, nil, chat.BusyQueue)
			return err
		case id != "":
			return ErrAppChatMoved
		case invalid != nil:
			return invalid
		}
		res = PostResult{}
		c := fresh // the transaction may run fn again: start from the same values each time
		if err := s.checkInputs(c.Model, "content", parts); err != nil {
			return err
		}
		if err := s.checkChats(ctx, tx, owner); err != nil {
			return err
		}
		if err := tx.InsertChat(ctx, &c); err != nil {
			return err
		}
		if err := tx.BindAppChat(ctx, owner, appID, c.ID); errors.Is(err, store.ErrExists) {
			return ErrAppChatMoved // bound by a request that committed while this one waited
		} else if err != nil {
			return err
		}
		if res.Message, err = chattx.InsertUser(ctx, tx, c.ID, parts, nil, n); err != nil {
			return err
		}
		n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindCreated, Chat: c})
		n.Wake = true
		return nil
	})
	if err != nil {
		return PostResult{}, fmt.Errorf("post message to app chat %q: %w", appID, err)
	}
	return res, nil
}

// InterruptAppChat is Interrupt on the chat an owner's app chat id names
// (AppChatID): an app's Stop button knows only its own id. An app id names
// one chat for good (until the chat is deleted, which Interrupt then
// finds), so the lookup needs no transaction of its own.
func (s *Service) InterruptAppChat(ctx context.Context, owner, appID string) (chat.Chat, error) {
	id, err := s.AppChatID(ctx, owner, appID)
	if err != nil {
		return chat.Chat{}, fmt.Errorf("interrupt app chat %q: %w", appID, err)
	}
	return s.Interrupt(ctx, owner, id)
}
