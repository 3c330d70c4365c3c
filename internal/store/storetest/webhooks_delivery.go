package storetest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// The delivery side of the webhook tests: claims, batches and outcomes.
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
	addWebhook(t, s, "wh_1", "alice", changeTypes...)
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
	deadline := time.Now().Add(30 * time.Second)
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
					// Empty is not done: on PostgreSQL a claim racing a
					// finish may take nothing for a moment (it re-checks the
					// deliveries a finish changed after its snapshot, and
					// another claim may hold the rest). Done is every
					// delivery sent; until then, claim again.
					mu.Lock()
					total := 0
					for _, ids := range sent {
						total += len(ids)
					}
					mu.Unlock()
					if total >= events*len(endpoints) {
						return
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("claims came back empty with %d of %d deliveries sent", total, events*len(endpoints))
						return
					}
					runtime.Gosched()
					continue
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

// testFinishStoresAnyText: an outcome whose error holds what a receiver
// answered (a NUL, bytes that are not UTF-8) is recorded, those made
// U+FFFD, on every database: were it refused, the attempt would never be
// recorded and the delivery sent again at every claim, forever.
func testFinishStoresAnyText(t *testing.T, open opener) {
	s := open(t)
	addOwner(t, s, "alice")
	addWebhook(t, s, "wh_1", "alice", store.EventStatusChanged)
	c := addChat(t, s, chat.Chat{})
	moveChat(t, s, c.ID, chat.Waiting, chat.Pending)
	d := claim(t, s, "d", time.Minute, 1)[0]
	finish(t, s, d, store.DeliveryOutcome{Status: store.DeliveryPending, RetryIn: time.Hour, StatusCode: 500,
		Error: "HTTP 500: a\x00b\xffc"})
	page, err := s.ListDeliveries(t.Context(), "alice", "wh_1", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if r := page.Deliveries[0]; r.Attempts != 1 || r.LastStatusCode != 500 || r.LastError != "HTTP 500: a\uFFFDb\uFFFDc" {
		t.Fatalf("delivery after an answer holding a NUL: %+v", r)
	}
}
