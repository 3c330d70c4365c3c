package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

var webhookTests = map[string]func(*testing.T, opener){
	"EndpointCRUD":             testWebhookCRUD,
	"EndpointOwnerScoped":      testWebhookOwnerScoped,
	"EndpointCapUnderRaces":    testWebhookCapUnderRaces,
	"OutboxEventsPerChange":    testOutboxEventsPerChange,
	"OutboxRollbackWritesNone": testOutboxRollback,
	"OutboxSubscriptions":      testOutboxSubscriptions,
	"OutboxTitleAndRecovery":   testOutboxTitleAndRecovery,
	"OutboxChatCreated":        testOutboxChatCreated,
	"OutboxActionThrough":      testOutboxActionThrough,
	"ClaimOneAtATimeInOrder":   testClaimInOrder,
	"ClaimLeaseRetaken":        testClaimLeaseRetaken,
	"ClaimBatchInOrder":        testClaimBatchInOrder,
	"ClaimConcurrentInOrder":   testClaimConcurrentInOrder,
	"FinishRetryAndStreak":     testFinishRetryAndStreak,
	"FinishGoneDisables":       testFinishGoneDisables,
	"FinishStoresAnyText":      testFinishStoresAnyText,
	"RedeliverAndList":         testRedeliverAndList,
	"RotateSecret":             testRotateSecret,
	"EventBodyOnce":            testEventBodyOnce,
	"Prune":                    testPruneWebhooks,
}

// changeTypes are the event types of a chat's changes, its creation left
// out: what the tests that count a change's events subscribe to.
var changeTypes = []string{store.EventStatusChanged, store.EventActionRequired, store.EventCompleted,
	store.EventFailed, store.EventTitleChanged}

// addWebhook creates an endpoint of owner subscribed to events.
func addWebhook(t *testing.T, s store.Store, id, owner string, events ...string) store.WebhookEndpoint {
	t.Helper()
	e := store.WebhookEndpoint{ID: id, Owner: owner, URL: "https://example.com/" + id, Events: events, Secret: "whsec_" + id}
	if err := s.CreateWebhook(t.Context(), &e, 0); err != nil {
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
	wantErr(t, "duplicate id", s.CreateWebhook(t.Context(), &dup, 0), store.ErrExists)
	nobody := store.WebhookEndpoint{ID: "wh_2", Owner: "nobody", URL: "https://x", Events: []string{"*"}, Secret: "s"}
	wantErr(t, "unknown owner", s.CreateWebhook(t.Context(), &nobody, 0), store.ErrNotFound)
	wantErr(t, "unknown owner, with a cap", s.CreateWebhook(t.Context(), &nobody, 5), store.ErrNotFound)

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
	addWebhook(t, s, "wh_a", "alice", changeTypes...)
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
	addWebhook(t, s, "wh_1", "alice", changeTypes...)
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
	// The chat's creation and addChat's own change (pending -> running)
	// went to wh_all too.
	if got := count("wh_all"); len(got) != 4 || got[3].EventType != store.EventCreated {
		t.Fatalf("wh_all's deliveries = %+v, want 4, the first chat.created", got)
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
	addWebhook(t, s, "wh_1", "alice", changeTypes...)
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
