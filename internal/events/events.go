// Package events names the pubsub topics parley uses and the events sent on
// them, so publishers (the API, the engine) and subscribers (SSE handlers,
// workers) agree on one shape.
package events

import (
	"github.com/parleyhq/parley/internal/chat"
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

// WebhookTopic wakes webhook deliverers: a chat's status or title changed
// (the change may have written webhook events), or a delivery was queued.
const WebhookTopic = "webhooks"
