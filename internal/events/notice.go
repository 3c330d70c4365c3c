package events

import (
	"context"
	"log/slog"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/pubsub"
)

// publishTimeout bounds the notifications sent after a commit.
const publishTimeout = 5 * time.Second

// Notice collects what one committed change announces: owner-feed events,
// chat-stream events, control messages, and whether workers must be woken.
// Build it inside the transaction's function (reset it at the top: the
// function may run twice) and Publish it after the commit.
type Notice struct {
	Feed    []FeedEvent
	Chat    []ChatEventFor
	Control []ControlFor
	Wake    bool
}

// ChatEventFor is an event for one chat's stream.
type ChatEventFor struct {
	ChatID string
	Event  ChatEvent
}

// ControlFor is a control message addressed to one chat's worker.
type ControlFor struct {
	ChatID string
	Msg    Control
}

// StatusChanged records the events of a chat whose status changed from
// before: status_change on the owner's feed, status on the chat's stream,
// and a wake-up when it became pending.
func (n *Notice) StatusChanged(before chat.Status, after chat.Chat) {
	if before == after.Status {
		return
	}
	n.Feed = append(n.Feed, FeedEvent{Kind: KindStatusChange, Chat: after})
	n.ChatEvent(after.ID, ChatEvent{Kind: KindStatus, Chat: &after})
	if after.Status == chat.Pending {
		n.Wake = true
	}
}

// Message records a new durable message of a chat.
func (n *Notice) Message(m chat.Message) {
	n.ChatEvent(m.ChatID, ChatEvent{Kind: KindMessage, Message: &m})
}

// ChatEvent records an event for a chat's stream.
func (n *Notice) ChatEvent(chatID string, ev ChatEvent) {
	n.Chat = append(n.Chat, ChatEventFor{ChatID: chatID, Event: ev})
}

// Publish sends everything recorded, in order, as one batch (one round trip
// on PostgreSQL). Failures are logged, never returned: the database already
// holds the truth, and subscribers re-read it.
func (n *Notice) Publish(ctx context.Context, ps pubsub.PubSub, log *slog.Logger) {
	msgs := n.messages(ps)
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if err := ps.PublishBatch(ctx, msgs); err != nil {
		log.Warn("events not published; subscribers re-read the database", "events", len(msgs), "err", err)
	}
}

// mayWriteWebhooks reports whether the notice tells of a change that
// writes webhook events (a chat created, a status or a title changed).
func (n *Notice) mayWriteWebhooks() bool {
	for _, ev := range n.Feed {
		switch ev.Kind {
		case KindCreated, KindStatusChange, KindTitleChange, KindActionRequired:
			return true
		}
	}
	return false
}

// messages encodes what was recorded, in order, for ps.
func (n *Notice) messages(ps pubsub.PubSub) []pubsub.Message {
	if len(n.Feed) == 0 && len(n.Chat) == 0 && len(n.Control) == 0 && !n.Wake {
		return nil
	}
	msgs := make([]pubsub.Message, 0, len(n.Chat)+len(n.Feed)+len(n.Control)+1)
	// On a busy server most chat events have no subscriber: they are not
	// even encoded.
	add := func(topic string, v any) {
		if pubsub.MayHear(ps, topic) {
			msgs = append(msgs, pubsub.Message{Topic: topic, Payload: Encode(v)})
		}
	}
	for _, c := range n.Chat {
		add(ChatTopic(c.ChatID), c.Event)
	}
	for _, ev := range n.Feed {
		add(FeedTopic(ev.Chat.Owner), ev)
	}
	for _, c := range n.Control {
		add(ControlTopic(c.ChatID), c.Msg)
	}
	if n.Wake && pubsub.MayHear(ps, WorkTopic) {
		msgs = append(msgs, pubsub.Message{Topic: WorkTopic})
	}
	if n.mayWriteWebhooks() && pubsub.MayHear(ps, WebhookTopic) {
		msgs = append(msgs, pubsub.Message{Topic: WebhookTopic})
	}
	return msgs
}
