package service

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/store"
)

// ChatPatch is what a client may change on a chat; nil fields stay as they
// are. It is also the JSON body of PATCH /api/v1/chats/{id}.
type ChatPatch struct {
	Title    *string            `json:"title"`
	Labels   *map[string]string `json:"labels"` // replaces every label; {} clears them
	Archived *bool              `json:"archived"`
	// AgentVersion moves a chat made from an agent to another version of
	// it: "latest" or a version number. The chat's model, system prompt,
	// tools, approve, dynamic tools and response format become the
	// version's.
	AgentVersion json.RawMessage `json:"agent_version"`
}

// UpdateChat applies p to the owner's chat and returns the chat. A changed
// title is announced with a title_change event.
func (s *Service) UpdateChat(ctx context.Context, owner, id string, p ChatPatch) (chat.Chat, error) {
	lim := s.limits()
	if p.Title != nil {
		if err := checkText("title", *p.Title, lim.MaxTitleBytes, false); err != nil {
			return chat.Chat{}, err
		}
	}
	if p.Labels != nil {
		if err := chat.ValidateLabels(*p.Labels, lim); err != nil {
			return chat.Chat{}, err
		}
	}
	var c chat.Chat
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		var err error
		if c, err = lockOwned(ctx, tx, owner, id); err != nil {
			return err
		}
		next := c
		if moving := len(p.AgentVersion) > 0 && string(p.AgentVersion) != "null"; moving {
			a, err := s.agentVersion(ctx, tx, c, p.AgentVersion)
			if err != nil {
				return err
			}
			if err := s.moveToAgentVersion(ctx, tx, &next, a); err != nil {
				return err
			}
			c = next
		}
		if p.Title != nil {
			next.Title = *p.Title
		}
		if p.Labels != nil {
			next.Labels = maps.Clone(*p.Labels)
			if next.Labels == nil {
				next.Labels = map[string]string{}
			}
		}
		if p.Archived != nil {
			next.Archived = *p.Archived
		}
		if next.Title == c.Title && maps.Equal(next.Labels, c.Labels) && next.Archived == c.Archived {
			return nil
		}
		if err := tx.UpdateChatMeta(ctx, &next); err != nil {
			return fmt.Errorf("update chat meta: %w", err)
		}
		if next.Title != c.Title {
			n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindTitleChange, Chat: next})
		}
		c = next
		return nil
	})
	if err != nil {
		return chat.Chat{}, fmt.Errorf("update chat %s: %w", id, err)
	}
	return c, nil
}

// DeleteChat removes the owner's chat with its messages, and announces it
// with a deleted event carrying the chat as it was.
func (s *Service) DeleteChat(ctx context.Context, owner, id string) error {
	err := s.write(ctx, func(tx store.Tx, n *events.Notice) error {
		c, err := lockOwned(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		if err := tx.DeleteChat(ctx, id); err != nil {
			return err
		}
		n.Feed = append(n.Feed, events.FeedEvent{Kind: events.KindDeleted, Chat: c})
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete chat %s: %w", id, err)
	}
	return nil
}
