package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var webhookTests = map[string]func(*testing.T, opener){
	"EndpointCRUD":             testWebhookCRUD,
	"EndpointOwnerScoped":      testWebhookOwnerScoped,
	"OutboxEventsPerChange":    testOutboxEventsPerChange,
	"OutboxRollbackWritesNone": testOutboxRollback,
	"OutboxSubscriptions":      testOutboxSubscriptions,
	"OutboxTitleAndRecovery":   testOutboxTitleAndRecovery,
	"OutboxActionThrough":      testOutboxActionThrough,
	"ClaimOneAtATimeInOrder":   testClaimInOrder,
	"ClaimLeaseRetaken":        testClaimLeaseRetaken,
	"ClaimBatchInOrder":        testClaimBatchInOrder,
	"ClaimConcurrentInOrder":   testClaimConcurrentInOrder,
	"FinishRetryAndStreak":     testFinishRetryAndStreak,
	"FinishGoneDisables":       testFinishGoneDisables,
	"RedeliverAndList":         testRedeliverAndList,
	"RotateSecret":             testRotateSecret,
	"EventBodyOnce":            testEventBodyOnce,
	"Prune":                    testPruneWebhooks,
}

// addWebhook creates an endpoint of owner subscribed to events.
func addWebhook(t *testing.T, s store.Store, id, owner string, events ...string) store.WebhookEndpoint {
	t.Helper()
	e := store.WebhookEndpoint{ID: id, Owner: owner, URL: "https://example.com/" + id, Events: events, Secret: "whsec_" + id}
	if err := s.CreateWebhook(t.Context(), &e); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	return e
}

// moveChat runs one status change in a transaction of its own.
func moveChat(t *testing.T, s store.Store, id string, from, to chat.Status) chat.Chat {
	t.Helper()
	var c chat.Chat
	inTx(t, s, func(tx store.Tx) error {
		var err error
		c, err = tx.TransitionChat(t.Context(), id, store.Transition{From: from, To: to,
			LastError: &chat.ChatError{Kind: "provider", Message: "boom"}, ActionTimeout: time.Minute})
		return err
	})
	return c
}

// eventTypes returns the types of the owner's events, in order.
func eventTypes(t *testing.T, s store.Store, owner string) []string {
	t.Helper()
	evs, err := s.WebhookEvents(t.Context(), owner)
	if err != nil {
		t.Fatalf("WebhookEvents: %v", err)
	}
	out := []string{}
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

// claimed is a claimed delivery as the tests look at it: with its
// endpoint and the claim that holds it.
type claimed struct {
	store.ClaimedDelivery
	Endpoint store.WebhookEndpoint
	Claim    string
}

// claimBatches claims deliveries, batch of each endpoint at most, and
// fails the test on error.
func claimBatches(t *testing.T, s store.Store, id string, ttl time.Duration, max, batch int) []store.DeliveryBatch {
	t.Helper()
	got, err := s.ClaimDeliveries(t.Context(), store.Claim{ID: id, TTL: ttl, Max: max, Batch: batch})
	if err != nil {
		t.Fatalf("ClaimDeliveries: %v", err)
	}
	for _, b := range got {
		if len(b.Deliveries) == 0 || len(b.Deliveries) > batch {
			t.Fatalf("claimed a batch of %d deliveries of %s, want 1 to %d", len(b.Deliveries), b.Endpoint.ID, batch)
		}
	}
	return got
}

// claim claims the oldest due delivery of up to max endpoints.
func claim(t *testing.T, s store.Store, id string, ttl time.Duration, max int) []claimed {
	t.Helper()
	var out []claimed
	for _, b := range claimBatches(t, s, id, ttl, max, 1) {
		out = append(out, claimed{ClaimedDelivery: b.Deliveries[0], Endpoint: b.Endpoint, Claim: id})
	}
	return out
}

// finishAs records o, the outcome of c's delivery, as the claim id with
// MaxFailures max.
func finishAs(s store.Store, id string, c claimed, max int, o store.DeliveryOutcome) error {
	o.ID = c.Delivery.ID
	return s.FinishDeliveries(context.Background(), store.BatchOutcome{ClaimID: id, EndpointID: c.Endpoint.ID,
		Outcomes: []store.DeliveryOutcome{o}, MaxFailures: max})
}

// finish records o, the outcome of c's delivery, as c's claim.
func finish(t *testing.T, s store.Store, c claimed, o store.DeliveryOutcome) {
	t.Helper()
	finishMax(t, s, c, 0, o)
}

// finishMax is finish with MaxFailures max.
func finishMax(t *testing.T, s store.Store, c claimed, max int, o store.DeliveryOutcome) {
	t.Helper()
	if err := finishAs(s, c.Claim, c, max, o); err != nil {
		t.Fatalf("FinishDeliveries(%+v): %v", o, err)
	}
}

func testWebhookCRUD(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	before := now()
	e := addWebhook(t, s, "wh_1", "alice", store.EventAll)
	if e.CreatedAt.Before(before.Add(-time.Second)) || !e.UpdatedAt.Equal(e.CreatedAt) {
		t.Fatalf("CreateWebhook set CreatedAt %v, UpdatedAt %v", e.CreatedAt, e.UpdatedAt)
	}
	got, err := s.GetWebhook(t.Context(), "alice", "wh_1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "endpoint", got, e)
	dup := store.WebhookEndpoint{ID: "wh_1", Owner: "alice", URL: "https://x", Events: []string{"*"}, Secret: "s"}
	wantErr(t, "duplicate id", s.CreateWebhook(t.Context(), &dup), store.ErrExists)
	nobody := store.WebhookEndpoint{ID: "wh_2", Owner: "nobody", URL: "https://x", Events: []string{"*"}, Secret: "s"}
	wantErr(t, "unknown owner", s.CreateWebhook(t.Context(), &nobody), store.ErrNotFound)

	url, desc := "https://example.org/hook", "mine"
	up, err := s.UpdateWebhook(t.Context(), "alice", "wh_1", store.WebhookPatch{URL: &url, Description: &desc,
		Events: []string{store.EventFailed}, Disabled: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	if up.URL != url || up.Description != desc || !slices.Equal(up.Events, []string{store.EventFailed}) ||
		!up.Disabled || up.DisabledReason == "" || up.Secret != e.Secret {
		t.Fatalf("updated endpoint = %+v", up)
	}
	wantEqual(t, "read back", mustGetWebhook(t, s, "alice", "wh_1"), up)
	up, err = s.UpdateWebhook(t.Context(), "alice", "wh_1", store.WebhookPatch{Disabled: ptr(false)})
	if err != nil || up.Disabled || up.DisabledReason != "" || up.FailureStreak != 0 {
		t.Fatalf("re-enabled endpoint = %+v, %v", up, err)
	}
	addWebhook(t, s, "wh_3", "alice", store.EventAll)
	list, err := s.ListWebhooks(t.Context(), "alice")
	if err != nil || len(list) != 2 || list[0].ID != "wh_1" || list[1].ID != "wh_3" {
		t.Fatalf("ListWebhooks = %+v, %v", list, err)
	}
	if err := s.DeleteWebhook(t.Context(), "alice", "wh_1"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetWebhook(t.Context(), "alice", "wh_1")
	wantErr(t, "get deleted", err, store.ErrNotFound)
	wantErr(t, "delete twice", s.DeleteWebhook(t.Context(), "alice", "wh_1"), store.ErrNotFound)
}

func mustGetWebhook(t *testing.T, s store.Store, owner, id string) store.WebhookEndpoint {
	t.Helper()
	e, err := s.GetWebhook(t.Context(), owner, id)
	if err != nil {
		t.Fatalf("GetWebhook(%s): %v", id, err)
	}
	return e
}

func testWebhookOwnerScoped(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addOwner(t, s, "bob")
	addWebhook(t, s, "wh_a", "alice", store.EventAll)
	c := addChat(t, s, chat.Chat{Owner: "alice"})
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	page, err := s.ListDeliveries(t.Context(), "alice", "wh_a", "", 10)
	if err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("alice's deliveries = %+v, %v", page, err)
	}
	d := page.Deliveries[0]

	_, err = s.GetWebhook(t.Context(), "bob", "wh_a")
	wantErr(t, "bob gets alice's", err, store.ErrNotFound)
	_, err = s.UpdateWebhook(t.Context(), "bob", "wh_a", store.WebhookPatch{Disabled: ptr(true)})
	wantErr(t, "bob patches alice's", err, store.ErrNotFound)
	_, err = s.RotateWebhookSecret(t.Context(), "bob", "wh_a", "whsec_x", time.Hour)
	wantErr(t, "bob rotates alice's", err, store.ErrNotFound)
	_, err = s.ListDeliveries(t.Context(), "bob", "wh_a", "", 10)
	wantErr(t, "bob lists alice's deliveries", err, store.ErrNotFound)
	_, err = s.Redeliver(t.Context(), "bob", "wh_a", d.ID)
	wantErr(t, "bob redelivers alice's", err, store.ErrNotFound)
	wantErr(t, "bob deletes alice's", s.DeleteWebhook(t.Context(), "bob", "wh_a"), store.ErrNotFound)
	if list, err := s.ListWebhooks(t.Context(), "bob"); err != nil || len(list) != 0 {
		t.Fatalf("bob's endpoints = %+v, %v", list, err)
	}
	// Bob's chats make no event for alice's endpoint.
	b := addChat(t, s, chat.Chat{Owner: "bob"})
	moveChat(t, s, b.ID, chat.Waiting, chat.Pending)
	if got := eventTypes(t, s, "bob"); len(got) != 0 {
		t.Fatalf("bob's events = %v, want none", got)
	}
	mustGetWebhook(t, s, "alice", "wh_a")
}

func testOutboxEventsPerChange(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	// No endpoint: no event.
	c := addChat(t, s, chat.Chat{})
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	if got := eventTypes(t, s, "alice"); len(got) != 0 {
		t.Fatalf("events without an endpoint = %v", got)
	}
	addWebhook(t, s, "wh_1", "alice", store.EventAll)
	acquire(t, s, "w", time.Minute) // pending -> running
	moveChat(t, s, c.ID, chat.Running, chat.Running)
	after := moveChat(t, s, c.ID, chat.Running, chat.Waiting)
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	acquire(t, s, "w", time.Minute)
	moveChat(t, s, c.ID, chat.Running, chat.Error)
	want := []string{
		store.EventStatusChanged,                       // pending -> running
		store.EventStatusChanged, store.EventCompleted, // running -> waiting (running -> running: none)
		store.EventStatusChanged,                    // waiting -> pending
		store.EventStatusChanged,                    // pending -> running
		store.EventStatusChanged, store.EventFailed, // running -> error
	}
	wantEqual(t, "event types", eventTypes(t, s, "alice"), want)
	evs, err := s.WebhookEvents(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, ev := range evs {
		if len(ev.ID) < 10 || ev.ID[:4] != "msg_" || ids[ev.ID] {
			t.Fatalf("event id %q: want a new msg_ id", ev.ID)
		}
		ids[ev.ID] = true
	}
	// The snapshot is the chat as the change left it.
	done := evs[2]
	if done.ChatID != c.ID || done.Owner != "alice" || done.Chat.Status != chat.Waiting ||
		!done.CreatedAt.Equal(after.UpdatedAt) || done.Body != nil {
		t.Fatalf("completed event = %+v, chat %+v", done, after)
	}
	failed := evs[6]
	if failed.Chat.Status != chat.Error || failed.Chat.LastError == nil || failed.Chat.LastError.Message != "boom" {
		t.Fatalf("failed event = %+v", failed)
	}
	// One delivery per event to the one endpoint.
	page, err := s.ListDeliveries(t.Context(), "alice", "wh_1", "", 100)
	if err != nil || len(page.Deliveries) != len(want) {
		t.Fatalf("deliveries = %d, %v; want %d", len(page.Deliveries), err, len(want))
	}
	for i, d := range page.Deliveries {
		ev := evs[len(evs)-1-i] // newest first
		if d.EventID != ev.ID || d.EventType != ev.Type || d.ChatID != c.ID || d.Status != store.DeliveryPending ||
			d.Attempts != 0 || d.NextAttemptAt == nil {
			t.Fatalf("delivery %d = %+v, event %+v", i, d, ev)
		}
	}
}

func testOutboxRollback(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventAll)
	c := addChat(t, s, chat.Chat{})
	err := txErr(t, s, func(tx store.Tx) error {
		if _, err := tx.TransitionChat(t.Context(), c.ID, store.Transition{From: chat.Waiting, To: chat.Pending}); err != nil {
			return err
		}
		c.Title = "renamed"
		if err := tx.UpdateChatMeta(t.Context(), &c); err != nil {
			return err
		}
		return errBoom
	})
	wantErr(t, "rolled back", err, errBoom)
	if got := eventTypes(t, s, "alice"); len(got) != 0 {
		t.Fatalf("events after a rollback = %v, want none", got)
	}
	if got := claim(t, s, "d", time.Minute, 10); len(got) != 0 {
		t.Fatalf("claimed %d deliveries after a rollback", len(got))
	}
}

func testOutboxSubscriptions(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_failed", "alice", store.EventFailed)
	addWebhook(t, s, "wh_all", "alice", store.EventAll)
	off := addWebhook(t, s, "wh_off", "alice", store.EventAll)
	if _, err := s.UpdateWebhook(t.Context(), "alice", off.ID, store.WebhookPatch{Disabled: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	c := addChat(t, s, chat.Chat{Status: chat.Running})
	moveChat(t, s, c.ID, chat.Running, chat.Error)
	count := func(id string) []store.WebhookDelivery {
		page, err := s.ListDeliveries(t.Context(), "alice", id, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return page.Deliveries
	}
	if got := count("wh_failed"); len(got) != 1 || got[0].EventType != store.EventFailed {
		t.Fatalf("wh_failed's deliveries = %+v, want one chat.failed", got)
	}
	// addChat's own change (pending -> running) went to wh_all too.
	if got := count("wh_all"); len(got) != 3 {
		t.Fatalf("wh_all's deliveries = %+v, want 3", got)
	}
	if got := count("wh_off"); len(got) != 0 {
		t.Fatalf("the disabled endpoint got %d deliveries", len(got))
	}
	// Only types someone subscribes to are written: with wh_all gone, a
	// status change writes nothing.
	if err := s.DeleteWebhook(t.Context(), "alice", "wh_all"); err != nil {
		t.Fatal(err)
	}
	n := len(eventTypes(t, s, "alice"))
	moveChat(t, s, c.ID, chat.Error, chat.Pending)
	if got := eventTypes(t, s, "alice"); len(got) != n {
		t.Fatalf("events = %v, want no new one", got)
	}
}

func testOutboxTitleAndRecovery(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventAll)
	c := addChat(t, s, chat.Chat{Title: "a"})
	inTx(t, s, func(tx store.Tx) error {
		c.Title, c.Labels = "b", map[string]string{"k": "v"}
		return tx.UpdateChatMeta(t.Context(), &c)
	})
	inTx(t, s, func(tx store.Tx) error {
		c.Archived = true // the same title: no event
		return tx.UpdateChatMeta(t.Context(), &c)
	})
	evs, err := s.WebhookEvents(t.Context(), "alice")
	if err != nil || len(evs) != 1 || evs[0].Type != store.EventTitleChanged || evs[0].Chat.Title != "b" ||
		evs[0].Chat.Labels["k"] != "v" {
		t.Fatalf("events after renaming = %+v, %v", evs, err)
	}
	// A lease that expired and was recovered: running -> pending.
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	acquire(t, s, "w", time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for getChat(t, s, c.ID).Status == chat.Running {
		if time.Now().After(deadline) {
			t.Fatal("lease not recovered after 10s")
		}
		if _, err := s.RecoverExpiredLeases(t.Context(), true); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{store.EventTitleChanged, store.EventStatusChanged, store.EventStatusChanged, store.EventStatusChanged}
	wantEqual(t, "event types", eventTypes(t, s, "alice"), want)
}

func testOutboxActionThrough(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventActionRequired)
	c := addChat(t, s, chat.Chat{Status: chat.Running})
	appendMessage(t, s, textMessage(c.ID, "weather?"))
	var call chat.Message
	inTx(t, s, func(tx store.Tx) error {
		call = chat.Message{ChatID: c.ID, Role: chat.RoleAssistant, Parts: []chat.Part{
			{Type: chat.PartToolCall, ToolCallID: "call_1", ToolName: "get_weather", Args: json.RawMessage(`{"city":"Paris"}`)}}}
		if err := tx.InsertMessage(t.Context(), &call); err != nil {
			return err
		}
		_, err := tx.TransitionChat(t.Context(), c.ID, store.Transition{From: chat.Running, To: chat.RequiresAction, ActionTimeout: time.Minute})
		return err
	})
	evs, err := s.WebhookEvents(t.Context(), "alice")
	if err != nil || len(evs) != 1 {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	ev := evs[0]
	if ev.Type != store.EventActionRequired || ev.ThroughMessageID != call.ID || ev.Chat.ActionDeadline == nil {
		t.Fatalf("action_required event = %+v, want through %d and a deadline", ev, call.ID)
	}
	// Later messages are not part of the turn as of the event.
	moveChat(t, s, c.ID, chat.RequiresAction, chat.Pending)
	appendMessage(t, s, chat.Message{ChatID: c.ID, Role: chat.RoleTool, Parts: []chat.Part{
		{Type: chat.PartToolResult, ToolCallID: "call_1", ToolName: "get_weather", Output: json.RawMessage(`1`)}}})
	turn, err := s.TurnThrough(t.Context(), c.ID, ev.ThroughMessageID)
	if err != nil || len(turn) != 1 || turn[0].ID != call.ID {
		t.Fatalf("TurnThrough = %+v, %v; want the assistant message alone", turn, err)
	}
}

func testClaimInOrder(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventStatusChanged)
	addWebhook(t, s, "wh_2", "alice", store.EventStatusChanged)
	c := addChat(t, s, chat.Chat{})
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending) // event 1
	acquire(t, s, "w", time.Minute)                  // event 2
	// One delivery per endpoint at a time, the oldest first.
	got := claim(t, s, "d1", time.Minute, 10)
	if len(got) != 2 || got[0].Event.ID != got[1].Event.ID || got[0].Endpoint.ID == got[1].Endpoint.ID {
		t.Fatalf("first claim = %+v, want event 1 to both endpoints", got)
	}
	first := got[0]
	if first.Event.Chat.Status != chat.Pending || first.Endpoint.Secret == "" || first.Delivery.Status != store.DeliveryPending {
		t.Fatalf("claimed = %+v", first)
	}
	if more := claim(t, s, "d2", time.Minute, 10); len(more) != 0 {
		t.Fatalf("claimed %d more while both endpoints are busy", len(more))
	}
	finish(t, s, first, store.DeliveryOutcome{Status: store.DeliveryDelivered, StatusCode: 204})
	next := claim(t, s, "d2", time.Minute, 10)
	if len(next) != 1 || next[0].Endpoint.ID != first.Endpoint.ID || next[0].Event.Chat.Status != chat.Running {
		t.Fatalf("after delivering, claimed %+v; want event 2 to %s", next, first.Endpoint.ID)
	}
	// A delivery waiting for a retry lets the later ones pass.
	finish(t, s, got[1], store.DeliveryOutcome{Status: store.DeliveryPending,
		RetryIn: time.Hour, StatusCode: 503})
	pass := claim(t, s, "d3", time.Minute, 10)
	if len(pass) != 1 || pass[0].Endpoint.ID != got[1].Endpoint.ID || pass[0].Event.ID != next[0].Event.ID {
		t.Fatalf("claimed %+v; want event 2 to %s past the retrying one", pass, got[1].Endpoint.ID)
	}
	// A finish by a worker that does not hold the claim is refused.
	err := finishAs(s, "d1", pass[0], 0, store.DeliveryOutcome{Status: store.DeliveryDelivered})
	wantErr(t, "finish by another worker", err, store.ErrLeaseLost)
}

func testClaimLeaseRetaken(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventAll)
	c := addChat(t, s, chat.Chat{})
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	got := claim(t, s, "dead", time.Millisecond, 1)
	if len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	var again []claimed
	deadline := time.Now().Add(10 * time.Second)
	for len(again) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("claim not retaken after 10s")
		}
		again = claim(t, s, "alive", time.Minute, 1)
	}
	if again[0].Delivery.ID != got[0].Delivery.ID {
		t.Fatalf("retook %d, want %d", again[0].Delivery.ID, got[0].Delivery.ID)
	}
	err := finishAs(s, "dead", got[0], 0, store.DeliveryOutcome{Status: store.DeliveryDelivered})
	wantErr(t, "finish by the dead claim", err, store.ErrLeaseLost)
	finish(t, s, again[0], store.DeliveryOutcome{Status: store.DeliveryDelivered, StatusCode: 200})
	page, err := s.ListDeliveries(t.Context(), "alice", "wh_1", "", 10)
	if err != nil || page.Deliveries[0].Status != store.DeliveryDelivered || page.Deliveries[0].Attempts != 1 ||
		page.Deliveries[0].DeliveredAt == nil || page.Deliveries[0].NextAttemptAt != nil || page.Deliveries[0].LastStatusCode != 200 {
		t.Fatalf("delivered = %+v, %v", page.Deliveries, err)
	}
}

func testFinishRetryAndStreak(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventStatusChanged)
	c := addChat(t, s, chat.Chat{})
	for _, to := range []chat.Status{chat.Pending, chat.Running, chat.Waiting, chat.Pending} {
		moveChat(t, s, c.ID, getChat(t, s, c.ID).Status, to)
	}
	// Four events. The first is retried, then fails; the streak reaches 2
	// with the second; MaxFailures 2 disables the endpoint, and the
	// pending ones fail with it.
	d := claim(t, s, "d", time.Minute, 1)[0]
	before := now()
	finish(t, s, d, store.DeliveryOutcome{Status: store.DeliveryPending,
		RetryIn: time.Hour, StatusCode: 500, Error: "HTTP 500"})
	page, _ := s.ListDeliveries(t.Context(), "alice", "wh_1", "", 10)
	r := page.Deliveries[len(page.Deliveries)-1]
	if r.Status != store.DeliveryPending || r.Attempts != 1 || r.LastStatusCode != 500 || r.LastError != "HTTP 500" ||
		r.NextAttemptAt == nil || r.NextAttemptAt.Before(before.Add(59*time.Minute)) {
		t.Fatalf("retrying delivery = %+v", r)
	}
	if e := mustGetWebhook(t, s, "alice", "wh_1"); e.FailureStreak != 0 {
		t.Fatalf("a retry counted in the streak: %d", e.FailureStreak)
	}
	d2 := claim(t, s, "d", time.Minute, 1)[0]
	finishMax(t, s, d2, 2, store.DeliveryOutcome{Status: store.DeliveryFailed, Error: "x"})
	if e := mustGetWebhook(t, s, "alice", "wh_1"); e.FailureStreak != 1 || e.Disabled {
		t.Fatalf("after one failed delivery: %+v", e)
	}
	d3 := claim(t, s, "d", time.Minute, 1)[0]
	finishMax(t, s, d3, 2, store.DeliveryOutcome{Status: store.DeliveryDelivered})
	if e := mustGetWebhook(t, s, "alice", "wh_1"); e.FailureStreak != 0 {
		t.Fatalf("a delivery did not reset the streak: %+v", e)
	}
	d4 := claim(t, s, "d", time.Minute, 1)[0]
	finishMax(t, s, d4, 2, store.DeliveryOutcome{Status: store.DeliveryFailed})
	moveChat(t, s, c.ID, chat.Pending, chat.Running)
	d5 := claim(t, s, "d", time.Minute, 1)[0]
	finishMax(t, s, d5, 2, store.DeliveryOutcome{Status: store.DeliveryFailed})
	e := mustGetWebhook(t, s, "alice", "wh_1")
	if !e.Disabled || e.FailureStreak != 2 || e.DisabledReason != "disabled after 2 failed deliveries in a row" {
		t.Fatalf("after 2 failed in a row: %+v", e)
	}
	page, _ = s.ListDeliveries(t.Context(), "alice", "wh_1", "", 10)
	for _, d := range page.Deliveries {
		if d.Status == store.DeliveryPending {
			t.Fatalf("delivery %+v still pending on a disabled endpoint", d)
		}
	}
	if r := page.Deliveries[len(page.Deliveries)-1]; r.LastError == "" {
		t.Fatalf("the failed retry has no error: %+v", r)
	}
	if got := claim(t, s, "d", time.Minute, 10); len(got) != 0 {
		t.Fatalf("claimed %d for a disabled endpoint", len(got))
	}
}

func testFinishGoneDisables(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventStatusChanged)
	c := addChat(t, s, chat.Chat{})
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	acquire(t, s, "w", time.Minute)
	d := claim(t, s, "d", time.Minute, 1)[0]
	finish(t, s, d, store.DeliveryOutcome{Status: store.DeliveryFailed,
		StatusCode: 410, Disable: "the endpoint answered 410 Gone"})
	e := mustGetWebhook(t, s, "alice", "wh_1")
	if !e.Disabled || e.DisabledReason != "the endpoint answered 410 Gone" {
		t.Fatalf("after a 410: %+v", e)
	}
	page, _ := s.ListDeliveries(t.Context(), "alice", "wh_1", "", 10)
	if len(page.Deliveries) != 2 || page.Deliveries[0].Status != store.DeliveryFailed ||
		page.Deliveries[0].LastError != "endpoint disabled: the endpoint answered 410 Gone" {
		t.Fatalf("deliveries after a 410: %+v", page.Deliveries)
	}
	// Re-enabled, it receives the next changes again.
	if _, err := s.UpdateWebhook(t.Context(), "alice", "wh_1", store.WebhookPatch{Disabled: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	moveChat(t, s, c.ID, chat.Running, chat.Waiting)
	if got := claim(t, s, "d", time.Minute, 10); len(got) != 1 || got[0].Event.Chat.Status != chat.Waiting {
		t.Fatalf("after re-enabling claimed %+v", got)
	}
}

func testRedeliverAndList(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventStatusChanged)
	c := addChat(t, s, chat.Chat{})
	for _, to := range []chat.Status{chat.Pending, chat.Running, chat.Waiting} {
		moveChat(t, s, c.ID, getChat(t, s, c.ID).Status, to)
	}
	var all []store.WebhookDelivery
	cursor := ""
	for range 5 {
		page, err := s.ListDeliveries(t.Context(), "alice", "wh_1", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Deliveries...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 3 || all[0].ID <= all[1].ID || all[1].ID <= all[2].ID {
		t.Fatalf("paged deliveries = %+v, want 3 newest first", all)
	}
	_, err := s.ListDeliveries(t.Context(), "alice", "wh_1", "nope", 2)
	wantErr(t, "bad cursor", err, store.ErrBadCursor)

	d := claim(t, s, "d", time.Minute, 1)[0]
	finish(t, s, d, store.DeliveryOutcome{Status: store.DeliveryFailed, StatusCode: 500})
	re, err := s.Redeliver(t.Context(), "alice", "wh_1", d.Delivery.ID)
	if err != nil {
		t.Fatal(err)
	}
	if re.ID <= all[0].ID || re.EventID != d.Event.ID || re.Status != store.DeliveryPending || re.Attempts != 0 ||
		re.EventType != store.EventStatusChanged || re.ChatID != c.ID {
		t.Fatalf("redelivery = %+v of %+v", re, d.Delivery)
	}
	_, err = s.Redeliver(t.Context(), "alice", "wh_1", 1<<40)
	wantErr(t, "redeliver unknown", err, store.ErrNotFound)
	// The redelivery is the newest: it goes last, with the first event's id.
	var order []string
	for range 4 {
		got := claim(t, s, "d", time.Minute, 1)
		if len(got) != 1 {
			break
		}
		order = append(order, got[0].Event.ID)
		finish(t, s, got[0], store.DeliveryOutcome{Status: store.DeliveryDelivered})
	}
	if want := []string{all[1].EventID, all[0].EventID, d.Event.ID}; !slices.Equal(order, want) {
		t.Fatalf("delivered events %v, want %v", order, want)
	}
}

func testRotateSecret(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	e := addWebhook(t, s, "wh_1", "alice", store.EventAll)
	before := now()
	r, err := s.RotateWebhookSecret(t.Context(), "alice", "wh_1", "whsec_new", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if r.Secret != "whsec_new" || r.PreviousSecret != e.Secret || r.PreviousSecretUntil == nil ||
		r.PreviousSecretUntil.Before(before.Add(24*time.Hour-time.Second)) {
		t.Fatalf("rotated = %+v", r)
	}
	if got := r.Secrets(now()); !slices.Equal(got, []string{"whsec_new", e.Secret}) {
		t.Fatalf("Secrets now = %v", got)
	}
	if got := r.Secrets(now().Add(25 * time.Hour)); !slices.Equal(got, []string{"whsec_new"}) {
		t.Fatalf("Secrets after the overlap = %v", got)
	}
	_, err = s.RotateWebhookSecret(t.Context(), "alice", "wh_x", "whsec_new", time.Hour)
	wantErr(t, "rotate unknown", err, store.ErrNotFound)
}

func testEventBodyOnce(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventAll)
	c := addChat(t, s, chat.Chat{})
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	d := claim(t, s, "d", time.Minute, 1)[0]
	if d.Event.Body != nil {
		t.Fatalf("a new event has a body: %q", d.Event.Body)
	}
	first, err := s.SetEventBodies(t.Context(), map[string][]byte{d.Event.ID: []byte(`{"a":1}`)})
	if err != nil || len(first) != 1 || string(first[d.Event.ID]) != `{"a":1}` {
		t.Fatalf("SetEventBodies = %q, %v", first, err)
	}
	second, err := s.SetEventBodies(t.Context(), map[string][]byte{d.Event.ID: []byte(`{"b":2}`)})
	if err != nil || string(second[d.Event.ID]) != `{"a":1}` {
		t.Fatalf("second SetEventBodies = %q, %v; want the first body", second, err)
	}
	// An unknown event fails the whole call: nothing is stored.
	acquire(t, s, "w", time.Minute)
	evs, _ := s.WebhookEvents(t.Context(), "alice")
	other := evs[len(evs)-1].ID
	_, err = s.SetEventBodies(t.Context(), map[string][]byte{other: []byte(`{}`), "msg_unknown": []byte(`{}`)})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetEventBodies with an unknown event: %v", err)
	}
	if evs, _ := s.WebhookEvents(t.Context(), "alice"); evs[len(evs)-1].Body != nil {
		t.Fatalf("a failed SetEventBodies stored %q", evs[len(evs)-1].Body)
	}
}

func testPruneWebhooks(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventStatusChanged)
	c := addChat(t, s, chat.Chat{})
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	acquire(t, s, "w", time.Minute)
	d := claim(t, s, "d", time.Minute, 1)[0]
	finish(t, s, d, store.DeliveryOutcome{Status: store.DeliveryDelivered})
	// Nothing is older than a minute ago.
	if n, err := s.PruneWebhooks(t.Context(), now().Add(-time.Minute), 100); err != nil || n != 0 {
		t.Fatalf("PruneWebhooks(a minute ago) = %d, %v", n, err)
	}
	// The delivered one and its event go; the pending one and its event stay.
	n, err := s.PruneWebhooks(t.Context(), now().Add(time.Second), 100)
	if err != nil || n != 2 {
		t.Fatalf("PruneWebhooks = %d, %v; want the delivery and its event", n, err)
	}
	page, _ := s.ListDeliveries(t.Context(), "alice", "wh_1", "", 10)
	if len(page.Deliveries) != 1 || page.Deliveries[0].Status != store.DeliveryPending {
		t.Fatalf("left %+v", page.Deliveries)
	}
	if evs, _ := s.WebhookEvents(t.Context(), "alice"); len(evs) != 1 || evs[0].ID != page.Deliveries[0].EventID {
		t.Fatalf("events left %+v", evs)
	}
	// An endpoint deleted leaves events no delivery refers to: pruned.
	if err := s.DeleteWebhook(t.Context(), "alice", "wh_1"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneWebhooks(t.Context(), now().Add(time.Second), 100); err != nil || n != 1 {
		t.Fatalf("PruneWebhooks after deleting the endpoint = %d, %v", n, err)
	}
}

// retitle changes the chat's title n times, writing n title_changed events.
func retitle(t *testing.T, s store.Store, c chat.Chat, n int) {
	t.Helper()
	for i := range n {
		c.Title = fmt.Sprintf("title %d", i)
		inTx(t, s, func(tx store.Tx) error { return tx.UpdateChatMeta(t.Context(), &c) })
	}
}

func testClaimBatchInOrder(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventTitleChanged)
	c := addChat(t, s, chat.Chat{})
	retitle(t, s, c, 5)
	evs, err := s.WebhookEvents(t.Context(), "alice")
	if err != nil || len(evs) != 5 {
		t.Fatalf("events = %d, %v", len(evs), err)
	}
	eventIDs := func(ds []store.ClaimedDelivery) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Event.ID)
		}
		return out
	}
	b := claimBatches(t, s, "c1", time.Minute, 10, 3)
	if len(b) != 1 || b[0].Endpoint.ID != "wh_1" || !slices.Equal(eventIDs(b[0].Deliveries), []string{evs[0].ID, evs[1].ID, evs[2].ID}) {
		t.Fatalf("first claim = %+v, want the 3 oldest events in order", b)
	}
	if more := claimBatches(t, s, "c2", time.Minute, 10, 3); len(more) != 0 {
		t.Fatalf("claimed %+v of an endpoint already claimed", more)
	}
	// The first delivered, the second to be retried, the third never tried.
	ds := b[0].Deliveries
	err = s.FinishDeliveries(t.Context(), store.BatchOutcome{ClaimID: "c1", EndpointID: "wh_1", Outcomes: []store.DeliveryOutcome{
		{ID: ds[0].Delivery.ID, Status: store.DeliveryDelivered, StatusCode: 200},
		{ID: ds[1].Delivery.ID, Status: store.DeliveryPending, RetryIn: time.Hour, StatusCode: 503, Error: "HTTP 503"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.FinishDeliveries(t.Context(), store.BatchOutcome{ClaimID: "c1", EndpointID: "wh_1"})
	wantErr(t, "a second finish of the claim", err, store.ErrLeaseLost)
	// The untried one is due as it was: it goes next, then the rest, past
	// the one waiting for its retry.
	b = claimBatches(t, s, "c3", time.Minute, 10, 10)
	if len(b) != 1 || !slices.Equal(eventIDs(b[0].Deliveries), []string{evs[2].ID, evs[3].ID, evs[4].ID}) {
		t.Fatalf("second claim = %+v, want events 3, 4 and 5", b)
	}
	if d := b[0].Deliveries[0].Delivery; d.Attempts != 0 || d.LastStatusCode != 0 {
		t.Fatalf("the untried delivery = %+v", d)
	}
	page, _ := s.ListDeliveries(t.Context(), "alice", "wh_1", "", 10)
	byEvent := map[string]store.WebhookDelivery{}
	for _, d := range page.Deliveries {
		byEvent[d.EventID] = d
	}
	if d := byEvent[evs[0].ID]; d.Status != store.DeliveryDelivered || d.Attempts != 1 || d.LastStatusCode != 200 {
		t.Fatalf("delivered = %+v", d)
	}
	if d := byEvent[evs[1].ID]; d.Status != store.DeliveryPending || d.Attempts != 1 || d.LastError != "HTTP 503" {
		t.Fatalf("retrying = %+v", d)
	}
}

// testClaimConcurrentInOrder has several claimers drain three endpoints at
// once: each delivery is claimed exactly once, and each endpoint's are
// claimed in event order, one batch at a time.
func testClaimConcurrentInOrder(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	endpoints := []string{"wh_1", "wh_2", "wh_3"}
	for _, id := range endpoints {
		addWebhook(t, s, id, "alice", store.EventTitleChanged)
	}
	const events = 40
	retitle(t, s, addChat(t, s, chat.Chat{}), events)
	var (
		mu   sync.Mutex
		sent = map[string][]int64{} // endpoint: deliveries, as claimed
		held = map[string]bool{}
	)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				id := fmt.Sprintf("w%d-%d", w, n)
				batches, err := s.ClaimDeliveries(context.Background(), store.Claim{ID: id, TTL: time.Minute, Max: 2, Batch: 3})
				if err != nil {
					errs <- err
					return
				}
				if len(batches) == 0 {
					return
				}
				for _, b := range batches {
					mu.Lock()
					if held[b.Endpoint.ID] {
						mu.Unlock()
						errs <- fmt.Errorf("claim %s took %s while another claim held it", id, b.Endpoint.ID)
						return
					}
					held[b.Endpoint.ID] = true
					var outs []store.DeliveryOutcome
					for _, d := range b.Deliveries {
						sent[b.Endpoint.ID] = append(sent[b.Endpoint.ID], d.Delivery.ID)
						outs = append(outs, store.DeliveryOutcome{ID: d.Delivery.ID, Status: store.DeliveryDelivered})
					}
					mu.Unlock()
					runtime.Gosched() // let another claimer try while this one holds the endpoint
					mu.Lock()
					held[b.Endpoint.ID] = false // before the finish: no claim can take it until then
					mu.Unlock()
					if err := s.FinishDeliveries(context.Background(), store.BatchOutcome{ClaimID: id, EndpointID: b.Endpoint.ID, Outcomes: outs}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, id := range endpoints {
		got := sent[id]
		if len(got) != events || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != events {
			t.Fatalf("%s: claimed %d deliveries %v; want each of %d once, in order", id, len(got), got, events)
		}
	}
}
