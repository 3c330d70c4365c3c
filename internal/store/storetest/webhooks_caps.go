package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// The webhook tests of the endpoint cap and of the chat.created event.

// testWebhookCapUnderRaces: creations that race each other, released
// together by a barrier, never pass the cap: each counts under the
// owner's lock, in the transaction that inserts (counted before it, 20
// creations from 3 endpoints gave far more than 5 on PostgreSQL). Another
// owner's endpoints do not count.
func testWebhookCapUnderRaces(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	for i := range 3 {
		addWebhook(t, s, fmt.Sprintf("wh_a%d", i), "alice", store.EventAll)
		addWebhook(t, s, fmt.Sprintf("wh_b%d", i), "bob", store.EventAll)
	}
	const max, racers = 5, 20
	start := make(chan struct{})
	errs := make(chan error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			e := store.WebhookEndpoint{ID: fmt.Sprintf("wh_r%d", i), Owner: "alice", URL: "https://x", Events: []string{"*"}, Secret: "s"}
			errs <- s.CreateWebhook(context.Background(), &e, max)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	created := 0
	for err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, store.ErrCapReached):
			t.Fatalf("CreateWebhook: %v, want nil or ErrCapReached", err)
		}
	}
	list, err := s.ListWebhooks(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if created != max-3 || len(list) != max {
		t.Fatalf("%d racing creations passed, alice has %d endpoints; want %d and %d", created, len(list), max-3, max)
	}
	e := store.WebhookEndpoint{ID: "wh_b9", Owner: "bob", URL: "https://x", Events: []string{"*"}, Secret: "s"}
	if err := s.CreateWebhook(t.Context(), &e, 4); err != nil {
		t.Fatalf("bob's 4th endpoint under a cap of 4: %v", err)
	}
}

// testOutboxChatCreated: inserting a chat writes a chat.created event, the
// chat as created, for the endpoints subscribed to it (or to "*"), in the
// inserting transaction: none when it rolls back, none without a
// subscriber.
func testOutboxChatCreated(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	addWebhook(t, s, "wh_created", "alice", store.EventCreated)
	addWebhook(t, s, "wh_other", "alice", store.EventStatusChanged)
	addWebhook(t, s, "wh_bob", "bob", store.EventAll)
	err := txErr(t, s, func(tx store.Tx) error {
		c := chat.Chat{ID: "rolled-back", Owner: "alice", Model: "m", Status: chat.Waiting}
		if err := tx.InsertChat(t.Context(), &c); err != nil {
			return err
		}
		return errBoom
	})
	wantErr(t, "rolled back", err, errBoom)
	c := addChat(t, s, chat.Chat{Title: "hello", Labels: map[string]string{"k": "v"}, Status: chat.Pending})
	evs, err := s.WebhookEvents(t.Context(), "alice")
	if err != nil || len(evs) != 1 || evs[0].Type != store.EventCreated || evs[0].ChatID != c.ID ||
		evs[0].Chat.Title != "hello" || evs[0].Chat.Status != chat.Pending || evs[0].Chat.Labels["k"] != "v" {
		t.Fatalf("events after a creation = %+v, %v", evs, err)
	}
	for id, want := range map[string]int{"wh_created": 1, "wh_other": 0} {
		page, err := s.ListDeliveries(t.Context(), "alice", id, "", 10)
		if err != nil || len(page.Deliveries) != want {
			t.Fatalf("%s's deliveries = %+v, %v; want %d", id, page.Deliveries, err, want)
		}
	}
	if got := eventTypes(t, s, "bob"); len(got) != 0 {
		t.Fatalf("bob's events = %v: another owner's chat", got)
	}
}
