// Package events names the pubsub topics parley uses and the events sent on
// them, so publishers (the API, the engine) and subscribers (SSE handlers,
// workers) agree on one shape.
package events

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/pubsub"
)

// Owner feed event kinds (GET /api/v1/chats/watch).
const (
	KindCreated        = "created"
	KindDeleted        = "deleted"
	KindStatusChange   = "status_change"
	KindTitleChange    = "title_change"
	KindActionRequired = "action_required"
	// KindResync tells a feed subscriber it missed events and must re-read
	// the chats it cares about; the server closes the stream after it.
	KindResync = "resync"
)

// FeedEvent is one event of an owner's feed.
type FeedEvent struct {
	Kind      string          `json:"kind"`
	Chat      chat.Chat       `json:"chat"`
	ToolCalls []chat.ToolCall `json:"tool_calls,omitempty"`
}

// FeedTopic is the topic of one owner's feed.
func FeedTopic(owner string) string { return "feed." + owner }

// ChatTopic is the topic of one chat's live events.
func ChatTopic(chatID string) string { return "chat." + chatID }

// WorkTopic wakes workers: some chat may have become pending.
const WorkTopic = "work"

// PublishFeed sends ev to its chat owner's feed.
func PublishFeed(ctx context.Context, ps pubsub.PubSub, ev FeedEvent) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", ev.Kind, err)
	}
	if err := ps.Publish(ctx, FeedTopic(ev.Chat.Owner), b); err != nil {
		return fmt.Errorf("publish %s event: %w", ev.Kind, err)
	}
	return nil
}
