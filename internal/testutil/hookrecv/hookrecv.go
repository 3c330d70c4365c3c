// Package hookrecv is a webhook endpoint for tests that start parley: it
// verifies every delivery with the Standard Webhooks library and records
// each event once per webhook-id, as a receiver that dedupes does.
package hookrecv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/parleyhq/parley/internal/chat"
)

// Body is the body of a delivery.
type Body struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      chat.Chat `json:"data"`
}

// Event is one event a receiver accepted.
type Event struct {
	ID   string    // webhook-id
	At   time.Time // when it was received
	Body Body
}

// Receiver is a webhook endpoint of the tests. It verifies every request
// with the Standard Webhooks library, refusing one that does not verify
// (and failing the test), answers 204 and records each event once per
// webhook-id, counting the repeats.
type Receiver struct {
	// Before, when set, sees every request first; true means it dealt
	// with it (answered or dropped it), and it is not recorded. Set it
	// before the first delivery can arrive.
	Before func(w http.ResponseWriter, r *http.Request) bool

	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	wh       *standardwebhooks.Webhook // nil until the secret is known
	events   []Event                   // in the order received, one per webhook-id
	ids      map[string]bool
	dups     int           // requests with a webhook-id already recorded
	requests int           // every request that verified
	changed  chan struct{} // a token after each recorded request
}

// New starts a receiver, closed when the test ends.
func New(t testing.TB) *Receiver {
	rc := &Receiver{t: t, ids: map[string]bool{}, changed: make(chan struct{}, 1)}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	if rc.Before != nil && rc.Before(w, r) {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the sender went away
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.wh == nil {
		rc.t.Errorf("a delivery arrived before the endpoint existed: %s", body)
		http.Error(w, "no secret", http.StatusServiceUnavailable)
		return
	}
	if err := rc.wh.Verify(body, r.Header); err != nil {
		rc.t.Errorf("a delivery did not verify: %v\nheaders %v\nbody %s", err, r.Header, body)
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	rc.requests++
	id := r.Header.Get("webhook-id")
	if rc.ids[id] {
		rc.dups++
	} else {
		e := Event{ID: id, At: time.Now()}
		if err := json.Unmarshal(body, &e.Body); err != nil {
			rc.t.Errorf("delivery %s: %v\n%s", id, err, body)
		}
		rc.ids[id] = true
		rc.events = append(rc.events, e)
	}
	select {
	case rc.changed <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// URL is the endpoint's address.
func (rc *Receiver) URL() string { return rc.srv.URL + "/hook" }

// SetSecret gives the receiver the endpoint's secret.
func (rc *Receiver) SetSecret(secret string) {
	rc.t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		rc.t.Fatalf("secret %q: %v", secret, err)
	}
	rc.mu.Lock()
	rc.wh = wh
	rc.mu.Unlock()
}

// Sign signs body as a delivery with the given webhook-id and time would
// be, with the secret SetSecret gave: a test posting its own requests
// sends what the receiver verifies.
func (rc *Receiver) Sign(id string, at time.Time, body []byte) (string, error) {
	rc.mu.Lock()
	wh := rc.wh
	rc.mu.Unlock()
	if wh == nil {
		return "", fmt.Errorf("sign %s: the receiver has no secret yet", id)
	}
	return wh.Sign(id, at, body)
}

// Snapshot returns the events recorded, and the number of repeats.
func (rc *Receiver) Snapshot() ([]Event, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Event(nil), rc.events...), rc.dups
}

// Count returns the number of events recorded and of repeats, without
// copying the events (a drain of thousands checks it after each one).
func (rc *Receiver) Count() (events, dups int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.events), rc.dups
}

// Requests returns the number of requests that verified, repeats included.
func (rc *Receiver) Requests() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.requests
}

// Changed receives a token after requests were recorded: a waiting test
// reads the counts again when it does. One token may stand for several
// requests.
func (rc *Receiver) Changed() <-chan struct{} { return rc.changed }

// WaitEvents waits until n events were recorded, within limit, and returns
// them.
func (rc *Receiver) WaitEvents(n int, limit time.Duration) []Event {
	rc.t.Helper()
	return rc.Wait(fmt.Sprintf("%d events", n), limit, func(evs []Event, _ int) bool { return len(evs) >= n })
}

// Wait waits, within limit, until cond holds of the events and the number
// of repeats, checking after each request recorded, and returns the
// events; it fails the test at the limit.
func (rc *Receiver) Wait(what string, limit time.Duration, cond func(evs []Event, dups int) bool) []Event {
	rc.t.Helper()
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for {
		evs, dups := rc.Snapshot()
		if cond(evs, dups) {
			return evs
		}
		select {
		case <-rc.changed:
		case <-timeout.C:
			rc.t.Fatalf("the receiver: no %s within %v (it has %d events, %d repeats)", what, limit, len(evs), dups)
		}
	}
}
