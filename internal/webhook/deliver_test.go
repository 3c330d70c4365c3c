package webhook_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/webhook"
)

// TestDeliverSigned: a chat change reaches its endpoint as a signed POST
// (verified by the Standard Webhooks library) with the Standard Webhooks
// headers and the {type, timestamp, data} body, and is recorded delivered.
func TestDeliverSigned(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	ep := e.endpoint(r.URL + "/hook")
	r.verifyWith(ep.Secret)
	e.run(webhook.Config{Policy: private})
	before := time.Now()
	e.move(chat.Pending)

	got := r.next()
	h := got.header
	if !strings.HasPrefix(h.Get("webhook-id"), "msg_") || !strings.HasPrefix(h.Get("webhook-signature"), "v1,") ||
		strings.Contains(h.Get("webhook-signature"), " ") {
		t.Fatalf("headers %v", h)
	}
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil || ts < before.Unix()-1 || ts > time.Now().Unix()+1 {
		t.Fatalf("webhook-timestamp %q", h.Get("webhook-timestamp"))
	}
	if got.msg.Type != store.EventStatusChanged || !got.msg.Timestamp.Equal(e.chat.UpdatedAt) {
		t.Fatalf("body %s, chat updated at %v", got.body, e.chat.UpdatedAt)
	}
	d := got.data
	if d.ID != e.chat.ID || d.Owner != "alice" || d.Title != "first" || d.Status != chat.Pending ||
		d.Labels == nil || d.RequiredAction != nil || d.LastError != nil || len(d.Omitted) != 0 {
		t.Fatalf("data %s", got.msg.Data)
	}
	for _, field := range []string{`"required_action":null`, `"last_error":null`, `"usage":{"input_tokens":0`, `"labels":{}`} {
		if !bytes.Contains(got.msg.Data, []byte(field)) {
			t.Fatalf("data %s lacks %s", got.msg.Data, field)
		}
	}
	del := e.waitDelivery(ep.ID, "delivered", func(d store.WebhookDelivery) bool { return d.Status == store.DeliveryDelivered })
	if del.Attempts != 1 || del.LastStatusCode != 204 || del.EventID != h.Get("webhook-id") || del.DeliveredAt == nil {
		t.Fatalf("delivery %+v", del)
	}
	if len(got.body) > webhook.MaxBodyBytes {
		t.Fatalf("body of %d bytes", len(got.body))
	}
}

// TestRetriesSendTheSameBytes: 503, then 500, then 200: three attempts
// with the same webhook-id and body, delivered at the third.
func TestRetriesSendTheSameBytes(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("database\nbusy"))
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	ep := e.endpoint(r.URL)
	r.verifyWith(ep.Secret)
	e.run(webhook.Config{Policy: webhook.Policy{AllowPrivate: true, Schedule: short(3), Jitter: noJitter}})
	e.move(chat.Pending)
	first, second, third := r.next(), r.next(), r.next()
	for _, rc := range []received{second, third} {
		if rc.header.Get("webhook-id") != first.header.Get("webhook-id") || !bytes.Equal(rc.body, first.body) {
			t.Fatalf("a retry sent %s %s, the first %s %s", rc.header.Get("webhook-id"), rc.body, first.header.Get("webhook-id"), first.body)
		}
	}
	d := e.waitDelivery(ep.ID, "delivered", func(d store.WebhookDelivery) bool { return d.Status == store.DeliveryDelivered })
	if d.Attempts != 3 || d.LastStatusCode != 200 {
		t.Fatalf("delivery %+v", d)
	}
	if e, err := e.st.GetWebhook(context.Background(), "alice", ep.ID); err != nil || e.FailureStreak != 0 {
		t.Fatalf("endpoint %+v, %v", e, err)
	}
}

// TestRetriesExhausted: every attempt fails: after the schedule the
// delivery is failed; with max_consecutive_failures 1 the endpoint is
// disabled, with the reason shown, and receives nothing more.
func TestRetriesExhausted(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("upstream down"))
	})
	ep := e.endpoint(r.URL, store.EventStatusChanged)
	r.verifyWith(ep.Secret)
	e.run(webhook.Config{Policy: webhook.Policy{AllowPrivate: true, Schedule: short(2), MaxFailures: 1, Jitter: noJitter}})
	e.move(chat.Pending)
	d := e.waitDelivery(ep.ID, "failed", func(d store.WebhookDelivery) bool { return d.Status == store.DeliveryFailed })
	if d.Attempts != 3 || d.LastStatusCode != 502 || d.LastError != "HTTP 502: upstream down" || d.NextAttemptAt != nil {
		t.Fatalf("delivery %+v", d)
	}
	got, err := e.st.GetWebhook(context.Background(), "alice", ep.ID)
	if err != nil || !got.Disabled || got.DisabledReason != "disabled after 1 failed deliveries in a row" {
		t.Fatalf("endpoint %+v, %v", got, err)
	}
	if n := r.count(); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	e.move(chat.Running)
	if ds := e.deliveries(ep.ID); len(ds) != 1 {
		t.Fatalf("a disabled endpoint got a delivery: %+v", ds)
	}
}

// TestRetryAfter: a 429 with Retry-After longer than the schedule's delay
// puts the next attempt at least that far away.
func TestRetryAfter(t *testing.T) {
	for _, header := range []string{"3600", time.Now().Add(2 * time.Hour).UTC().Format(http.TimeFormat)} {
		t.Run(header, func(t *testing.T) {
			e := newEnv(t)
			r := newReceiver(t, func(_ int, w http.ResponseWriter) {
				w.Header().Set("Retry-After", header)
				w.WriteHeader(http.StatusTooManyRequests)
			})
			ep := e.endpoint(r.URL)
			r.verifyWith(ep.Secret)
			e.run(webhook.Config{Policy: webhook.Policy{AllowPrivate: true, Schedule: short(3), Jitter: noJitter}})
			before := time.Now()
			e.move(chat.Pending)
			d := e.waitDelivery(ep.ID, "retrying", func(d store.WebhookDelivery) bool { return d.Attempts == 1 })
			if d.Status != store.DeliveryPending || d.NextAttemptAt == nil || d.NextAttemptAt.Before(before.Add(59*time.Minute)) ||
				d.LastStatusCode != 429 {
				t.Fatalf("delivery %+v: want the next attempt an hour or more away", d)
			}
		})
	}
}

// TestGoneDisables: a 410 fails the delivery and disables the endpoint
// at once; PATCH-like re-enabling lets the next change through.
func TestGoneDisables(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	ep := e.endpoint(r.URL, store.EventStatusChanged)
	r.verifyWith(ep.Secret)
	e.run(webhook.Config{Policy: webhook.Policy{AllowPrivate: true, Schedule: short(5)}})
	e.move(chat.Pending)
	r.next()
	d := e.waitDelivery(ep.ID, "failed", func(d store.WebhookDelivery) bool { return d.Status == store.DeliveryFailed })
	if d.Attempts != 1 || d.LastStatusCode != 410 {
		t.Fatalf("delivery %+v", d)
	}
	got, _ := e.st.GetWebhook(context.Background(), "alice", ep.ID)
	if !got.Disabled || got.DisabledReason != webhook.GoneReason {
		t.Fatalf("endpoint %+v", got)
	}
	e.move(chat.Running) // disabled: no delivery
	if ds := e.deliveries(ep.ID); len(ds) != 1 {
		t.Fatalf("deliveries %+v", ds)
	}
	if _, err := e.st.UpdateWebhook(context.Background(), "alice", ep.ID, store.WebhookPatch{Disabled: new(bool)}); err != nil {
		t.Fatal(err)
	}
	e.move(chat.Waiting)
	if rc := r.next(); rc.data.Status != chat.Waiting {
		t.Fatalf("after re-enabling got %s", rc.body)
	}
	if n := r.count(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

// TestTimeout: a receiver that does not answer in time is a failed
// attempt, retried later.
func TestTimeout(t *testing.T) {
	e := newEnv(t)
	gate := make(chan struct{})
	r := newReceiver(t, func(_ int, w http.ResponseWriter) { <-gate })
	t.Cleanup(func() { close(gate) }) // before the receiver closes
	ep := e.endpoint(r.URL)
	r.verifyWith(ep.Secret)
	e.run(webhook.Config{Timeout: 100 * time.Millisecond, Policy: webhook.Policy{AllowPrivate: true,
		Schedule: []time.Duration{time.Hour}, Jitter: noJitter}})
	e.move(chat.Pending)
	d := e.waitDelivery(ep.ID, "timed out", func(d store.WebhookDelivery) bool { return d.Attempts == 1 })
	if d.Status != store.DeliveryPending || d.LastStatusCode != 0 || !strings.Contains(d.LastError, "timed out") {
		t.Fatalf("delivery %+v", d)
	}
}

// TestRedirectNotFollowed: a 302 is the attempt's answer, a failure
// retried; its target is never asked.
func TestRedirectNotFollowed(t *testing.T) {
	e := newEnv(t)
	target := newReceiver(t, nil)
	r := newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Location", target.URL)
		w.WriteHeader(http.StatusFound)
	})
	ep := e.endpoint(r.URL)
	r.verifyWith(ep.Secret)
	e.run(webhook.Config{Policy: webhook.Policy{AllowPrivate: true, Schedule: []time.Duration{time.Hour}}})
	e.move(chat.Pending)
	d := e.waitDelivery(ep.ID, "redirected", func(d store.WebhookDelivery) bool { return d.Attempts == 1 })
	if d.Status != store.DeliveryPending || d.LastStatusCode != 302 || !strings.Contains(d.LastError, "redirects are not followed") {
		t.Fatalf("delivery %+v", d)
	}
	if n := target.count(); n != 0 {
		t.Fatalf("the redirect's target got %d requests", n)
	}
}

// TestPrivateRefusedAtDelivery: without allow_private, a delivery to a
// loopback address is refused when it connects (the URL passed an earlier
// check, or DNS changed since), and never reaches the receiver.
func TestPrivateRefusedAtDelivery(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	ep := e.endpoint(r.URL)
	r.verifyWith(ep.Secret)
	e.run(webhook.Config{Policy: webhook.Policy{Schedule: []time.Duration{time.Hour}}})
	e.move(chat.Pending)
	d := e.waitDelivery(ep.ID, "refused", func(d store.WebhookDelivery) bool { return d.Attempts == 1 })
	if d.Status != store.DeliveryPending || !strings.Contains(d.LastError, "loopback") ||
		!strings.Contains(d.LastError, "allow_private") {
		t.Fatalf("delivery %+v", d)
	}
	if n := r.count(); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
}

// TestRotationSignsWithBoth: after a rotation, every request verifies
// with the old secret and with the new one.
func TestRotationSignsWithBoth(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	ep := e.endpoint(r.URL)
	rot, err := e.st.RotateWebhookSecret(context.Background(), "alice", ep.ID, webhook.NewSecret(), webhook.SecretOverlap)
	if err != nil {
		t.Fatal(err)
	}
	r.verifyWith(ep.Secret, rot.Secret)
	e.run(webhook.Config{Policy: private})
	e.move(chat.Pending)
	got := r.next()
	if sigs := strings.Fields(got.header.Get("webhook-signature")); len(sigs) != 2 {
		t.Fatalf("webhook-signature %q: want two", got.header.Get("webhook-signature"))
	}
	// Past the overlap, the old secret no longer signs.
	if _, err := e.st.RotateWebhookSecret(context.Background(), "alice", ep.ID, webhook.NewSecret(), time.Microsecond); err != nil {
		t.Fatal(err)
	}
	cur, _ := e.st.GetWebhook(context.Background(), "alice", ep.ID)
	r.verifyWith(cur.Secret)
	time.Sleep(time.Millisecond) // the microsecond's overlap passes
	e.move(chat.Running)
	if got := r.next(); len(strings.Fields(got.header.Get("webhook-signature"))) != 1 {
		t.Fatalf("webhook-signature %q: want one", got.header.Get("webhook-signature"))
	}
}

// TestInOrderPerEndpoint: an endpoint receives a chat's changes in order.
func TestInOrderPerEndpoint(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t, nil)
	ep := e.endpoint(r.URL, store.EventStatusChanged)
	r.verifyWith(ep.Secret)
	path := []chat.Status{chat.Pending, chat.Running, chat.Running, chat.Error, chat.Pending, chat.Running, chat.Waiting}
	for _, to := range path {
		if to != e.chat.Status {
			e.move(to)
		}
	}
	e.run(webhook.Config{Policy: private, Concurrency: 4})
	want := []chat.Status{chat.Pending, chat.Running, chat.Error, chat.Pending, chat.Running, chat.Waiting}
	for i, st := range want {
		if got := r.next(); got.data.Status != st {
			t.Fatalf("request %d is %s, want %s", i, got.data.Status, st)
		}
	}
}
