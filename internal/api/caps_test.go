package api_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/store"
)

// TestWebhookCapUnderConcurrentCreates: an owner with 48 endpoints sends 12
// creations at once (released together by a barrier): exactly 2 pass and
// the owner has 50, on both stores. The cap was counted before the insert,
// outside its transaction: 60 concurrent creations from 48 gave 70.
func TestWebhookCapUnderConcurrentCreates(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		tok := s.token("alice")
		body := map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}}
		for range 48 {
			s.createWebhook(tok, body)
		}
		const racers = 12
		start := make(chan struct{})
		statuses := make(chan int, racers)
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				<-start
				statuses <- s.do("POST", "/api/v1/webhooks", tok, body).status
			})
		}
		close(start)
		wg.Wait()
		close(statuses)
		count := map[int]int{}
		for st := range statuses {
			count[st]++
		}
		var list struct {
			Webhooks []webhookBody `json:"webhooks"`
		}
		s.do("GET", "/api/v1/webhooks", tok, nil).expect(t, http.StatusOK, &list)
		if count[http.StatusCreated] != 2 || count[http.StatusConflict] != racers-2 || len(list.Webhooks) != 50 {
			t.Fatalf("answers %v, %d endpoints; want 2 created, %d conflicts, 50 endpoints", count, len(list.Webhooks), racers-2)
		}
		s.do("POST", "/api/v1/webhooks", tok, body).expectError(t, http.StatusConflict, "too_many_webhooks")
	}, allowPrivate)
}

// TestWebhookFieldsStorable: a URL with a raw space and a description with
// a NUL are refused at creation and by PATCH, on both stores (PostgreSQL
// cannot store the NUL: it was a 500), and nothing is written.
func TestWebhookFieldsStorable(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		tok := s.token("alice")
		for _, tc := range []struct {
			body map[string]any
			code string
		}{
			{map[string]any{"url": "http://127.0.0.1:9/a hook", "events": []string{"*"}}, "invalid_url"},
			{map[string]any{"url": "http://127.0.0.1:9/hook\t", "events": []string{"*"}}, "invalid_url"},
			{map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}, "description": "a\x00b"}, "invalid_field"},
		} {
			s.do("POST", "/api/v1/webhooks", tok, tc.body).expectError(t, http.StatusBadRequest, tc.code)
		}
		var list struct {
			Webhooks []webhookBody `json:"webhooks"`
		}
		s.do("GET", "/api/v1/webhooks", tok, nil).expect(t, http.StatusOK, &list)
		if len(list.Webhooks) != 0 {
			t.Fatalf("refused creations wrote %+v", list.Webhooks)
		}
		w := s.createWebhook(tok, map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}})
		s.do("PATCH", "/api/v1/webhooks/"+w.ID, tok, map[string]any{"description": "\x00"}).expectError(t, http.StatusBadRequest, "invalid_field")
		s.do("PATCH", "/api/v1/webhooks/"+w.ID, tok, map[string]any{"url": "http://127.0.0.1:9/x y"}).expectError(t, http.StatusBadRequest, "invalid_url")
	}, allowPrivate)
}

// TestRedeliverFailedRoute: POST /webhooks/{id}/redeliver-failed queues
// again the events whose deliveries failed since the time given, answers
// how many, refuses a body without since, a disabled endpoint (409) and
// another owner's (404).
func TestRedeliverFailedRoute(t *testing.T) {
	s := newSQLite(t, allowPrivate)
	tok, bob := s.token("alice"), s.token("bob")
	w := s.createWebhook(tok, map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"chat.status_changed"}})
	c := s.createChat(tok, map[string]any{})
	before := time.Now().Add(-time.Minute)
	s.force(c.ID, nil, store.Transition{From: "waiting", To: "pending"})
	s.force(c.ID, nil, store.Transition{From: "pending", To: "waiting"})
	// Both deliveries fail.
	ctx := context.Background()
	for range 2 {
		batches, err := s.st.ClaimDeliveries(ctx, store.Claim{ID: "t", TTL: time.Minute, Max: 1, Batch: 1})
		if err != nil || len(batches) != 1 {
			t.Fatalf("claim: %v, %d batches", err, len(batches))
		}
		d := batches[0].Deliveries[0].Delivery
		if err := s.st.FinishDeliveries(ctx, store.BatchOutcome{ClaimID: "t", EndpointID: w.ID,
			Outcomes: []store.DeliveryOutcome{{ID: d.ID, Status: store.DeliveryFailed, StatusCode: 500, Error: "HTTP 500"}}}); err != nil {
			t.Fatal(err)
		}
	}
	path := "/api/v1/webhooks/" + w.ID + "/redeliver-failed"
	s.do("POST", path, tok, map[string]any{}).expectError(t, http.StatusBadRequest, "invalid_field")
	s.do("POST", path, bob, map[string]any{"since": before}).expectError(t, http.StatusNotFound, "not_found")
	var got struct {
		Redelivered int `json:"redelivered"`
	}
	s.do("POST", path, tok, map[string]any{"since": time.Now().Add(time.Hour)}).expect(t, http.StatusAccepted, &got)
	if got.Redelivered != 0 {
		t.Fatalf("redelivered %d failed since a future time", got.Redelivered)
	}
	s.do("POST", path, tok, map[string]any{"since": before}).expect(t, http.StatusAccepted, &got)
	if got.Redelivered != 2 {
		t.Fatalf("redelivered %d, want 2", got.Redelivered)
	}
	var page struct {
		Deliveries []deliveryBody `json:"deliveries"`
	}
	s.do("GET", "/api/v1/webhooks/"+w.ID+"/deliveries", tok, nil).expect(t, http.StatusOK, &page)
	if len(page.Deliveries) != 4 || page.Deliveries[0].Status != "pending" || page.Deliveries[1].Status != "pending" ||
		page.Deliveries[0].EventID != page.Deliveries[2].EventID || page.Deliveries[1].EventID != page.Deliveries[3].EventID {
		t.Fatalf("deliveries after the redelivery (newest first): %+v", page.Deliveries)
	}
	// Their last deliveries are pending now: nothing more to redeliver.
	s.do("POST", path, tok, map[string]any{"since": before}).expect(t, http.StatusAccepted, &got)
	if got.Redelivered != 0 {
		t.Fatalf("redelivered %d again", got.Redelivered)
	}
	s.do("PATCH", "/api/v1/webhooks/"+w.ID, tok, map[string]any{"disabled": true}).expect(t, http.StatusOK, nil)
	s.do("POST", path, tok, map[string]any{"since": before}).expectError(t, http.StatusConflict, "webhook_disabled")
}

// TestMaxChatsUnderConcurrentCreates: an owner with max_chats 4 and 3
// chats sends 12 creations at once (released together by a barrier):
// exactly 1 passes, on both stores. Counted in the creating transaction but
// without the owner's lock, racing creations on PostgreSQL each saw 3.
func TestMaxChatsUnderConcurrentCreates(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		tok := s.token("alice")
		s.setOverrides("alice", quota.Overrides{MaxChats: ptr(4)})
		for range 3 {
			s.createChat(tok, map[string]any{})
		}
		const racers = 12
		start := make(chan struct{})
		statuses := make(chan int, racers)
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				<-start
				statuses <- s.do("POST", "/api/v1/chats", tok, map[string]any{}).status
			})
		}
		close(start)
		wg.Wait()
		close(statuses)
		count := map[int]int{}
		for st := range statuses {
			count[st]++
		}
		if n := len(s.listChats(tok, "?archived=any&limit=100").Chats); count[http.StatusCreated] != 1 ||
			count[http.StatusTooManyRequests] != racers-1 || n != 4 {
			t.Fatalf("answers %v, %d chats; want 1 created, %d refused, 4 chats", count, n, racers-1)
		}
	})
}
