package webhook

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/store"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := Policy{Schedule: []time.Duration{5 * time.Second, 5 * time.Minute}, MaxFailures: 3,
		Jitter: func(d time.Duration) time.Duration { return d }}
	cases := []struct {
		name    string
		attempt int
		a       answer
		status  string
		retryIn time.Duration
		disable string
		err     string
	}{
		{"200", 1, answer{code: 200}, store.DeliveryDelivered, 0, "", ""},
		{"204 on the last", 3, answer{code: 204}, store.DeliveryDelivered, 0, "", ""},
		{"410", 1, answer{code: 410}, store.DeliveryFailed, 0, GoneReason, "HTTP 410"},
		{"500", 1, answer{code: 500, snippet: "oops"}, store.DeliveryPending, 5 * time.Second, "", "HTTP 500: oops"},
		{"404 retries too", 2, answer{code: 404}, store.DeliveryPending, 5 * time.Minute, "", "HTTP 404"},
		{"301", 1, answer{code: 301}, store.DeliveryPending, 5 * time.Second, "", "HTTP 301 (redirects are not followed)"},
		{"after the last", 3, answer{code: 503}, store.DeliveryFailed, 0, "", "HTTP 503"},
		{"connection error", 1, answer{err: errors.New("connection refused")}, store.DeliveryPending, 5 * time.Second, "", "connection refused"},
		{"Retry-After seconds", 1, answer{code: 429, retryAfter: "120"}, store.DeliveryPending, 2 * time.Minute, "", "HTTP 429"},
		{"Retry-After shorter than the schedule", 2, answer{code: 429, retryAfter: "1"}, store.DeliveryPending, 5 * time.Minute, "", "HTTP 429"},
		{"Retry-After date", 1, answer{code: 503, retryAfter: now.Add(time.Hour).Format(http.TimeFormat)}, store.DeliveryPending, time.Hour, "", "HTTP 503"},
		{"Retry-After capped", 1, answer{code: 503, retryAfter: "999999999"}, store.DeliveryPending, MaxRetryAfter, "", "HTTP 503"},
		{"Retry-After garbage", 1, answer{code: 503, retryAfter: "soon"}, store.DeliveryPending, 5 * time.Second, "", "HTTP 503"},
		{"Retry-After on the last", 3, answer{code: 429, retryAfter: "5"}, store.DeliveryFailed, 0, "", "HTTP 429"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := p.decide(tc.attempt, tc.a, now)
			if o.Status != tc.status || o.RetryIn != tc.retryIn || o.Disable != tc.disable || o.Error != tc.err ||
				o.StatusCode != tc.a.code {
				t.Fatalf("decide = %+v", o)
			}
		})
	}
}

func TestDefaultJitter(t *testing.T) {
	p := Policy{}
	for range 100 {
		if d := p.jitter(time.Minute); d < time.Minute || d > time.Minute+6*time.Second {
			t.Fatalf("jitter(1m) = %v, want 1m to 1m6s", d)
		}
	}
}
