package events_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/pubsub"
	"github.com/parleyhq/parley/internal/pubsub/memory"
)

// recorder is a PubSub that records the topics of what it is asked to
// publish.
type recorder struct {
	pubsub.PubSub
	topics []string
}

func (r *recorder) PublishBatch(ctx context.Context, msgs []pubsub.Message) error {
	for _, m := range msgs {
		r.topics = append(r.topics, m.Topic)
	}
	return r.PubSub.PublishBatch(ctx, msgs)
}

// listening is a recorder over a PubSub that knows its subscribers.
type listening struct{ *recorder }

func (l listening) HasSubscribers(topic string) bool {
	return l.PubSub.(*memory.PubSub).HasSubscribers(topic)
}

func notice() events.Notice {
	var n events.Notice
	for _, id := range []string{"a", "b"} {
		n.StatusChanged(chat.Running, chat.Chat{ID: id, Owner: "alice", Status: chat.Pending})
	}
	return n
}

// TestPublishSkipsTopicsNobodyHears: on a PubSub that knows its subscribers,
// only the topics someone subscribes to are encoded and published, and the
// subscriber gets its event.
func TestPublishSkipsTopicsNobodyHears(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	sub, err := mem.Subscribe(t.Context(), events.ChatTopic("a"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{PubSub: mem}
	n := notice()
	n.Publish(t.Context(), listening{rec}, slog.New(slog.DiscardHandler))
	if want := []string{events.ChatTopic("a")}; !slices.Equal(rec.topics, want) {
		t.Fatalf("published %q, want only %q", rec.topics, want)
	}
	m := <-sub.C()
	var ev events.ChatEvent
	if err := json.Unmarshal(m.Payload, &ev); err != nil || ev.Kind != events.KindStatus || ev.Chat == nil || ev.Chat.Status != chat.Pending {
		t.Fatalf("subscriber got %s (%v), want the status event", m.Payload, err)
	}
}

// TestPublishSendsAllWhereSubscribersAreUnknown: on a PubSub that cannot
// know its subscribers (other replicas listen), everything is published,
// and a status change wakes the webhook deliverers last.
func TestPublishSendsAllWhereSubscribersAreUnknown(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	rec := &recorder{PubSub: mem}
	n := notice()
	n.Publish(t.Context(), rec, slog.New(slog.DiscardHandler))
	want := []string{events.ChatTopic("a"), events.ChatTopic("b"), events.FeedTopic("alice"), events.FeedTopic("alice"), events.WorkTopic,
		events.WebhookTopic}
	if !slices.Equal(rec.topics, want) {
		t.Fatalf("published %q, want %q", rec.topics, want)
	}
}

// TestCreationWakesTheDeliverers: a notice of a created chat (which writes
// a chat.created event) wakes the webhook deliverers.
func TestCreationWakesTheDeliverers(t *testing.T) {
	mem := memory.New()
	defer mem.Close()
	rec := &recorder{PubSub: mem}
	n := &events.Notice{Feed: []events.FeedEvent{{Kind: events.KindCreated, Chat: chat.Chat{ID: "a", Owner: "alice"}}}}
	n.Publish(t.Context(), rec, slog.New(slog.DiscardHandler))
	if !slices.Contains(rec.topics, events.WebhookTopic) {
		t.Fatalf("published %q, want %q among them", rec.topics, events.WebhookTopic)
	}
}
