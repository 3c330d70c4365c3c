package browsertest

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

// webhooksConfig lets serve deliver to the tests' receivers on 127.0.0.1
// and retries at once.
const webhooksConfig = `webhooks:
  allow_private: true
  retry_schedule: ["50ms", "50ms", "50ms"]
`

// delivered is one event a receiver accepted.
type delivered struct {
	id   string // webhook-id
	body struct {
		Type string    `json:"type"`
		Data chat.Chat `json:"data"`
	}
}

// receiver is a webhook endpoint of the tests: it verifies every request
// with the Standard Webhooks library (failing the test on one that does
// not verify), answers 204 and records each event once per webhook-id,
// counting the repeats.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	wh      *standardwebhooks.Webhook // nil until the secret is known
	events  []delivered
	ids     map[string]bool
	dups    int
	changed chan struct{} // a token after each recorded request
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t, ids: map[string]bool{}, changed: make(chan struct{}, 1)}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
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
	id := r.Header.Get("webhook-id")
	if rc.ids[id] {
		rc.dups++
	} else {
		d := delivered{id: id}
		if err := json.Unmarshal(body, &d.body); err != nil {
			rc.t.Errorf("delivery %s: %v\n%s", id, err, body)
		}
		rc.ids[id] = true
		rc.events = append(rc.events, d)
	}
	select {
	case rc.changed <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// url is the endpoint's address.
func (rc *receiver) url() string { return rc.srv.URL + "/hook" }

// setSecret gives the receiver the endpoint's secret.
func (rc *receiver) setSecret(secret string) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		rc.t.Fatalf("secret %q: %v", secret, err)
	}
	rc.mu.Lock()
	rc.wh = wh
	rc.mu.Unlock()
}

// waitEvents waits, within limit, until n events were recorded.
func (rc *receiver) waitEvents(n int, limit time.Duration) []delivered {
	rc.t.Helper()
	return rc.waitLimit(fmt.Sprintf("%d events", n), limit, func(evs []delivered, _ int) bool { return len(evs) >= n })
}

// wait waits, within deadline, until cond holds of the events and the
// number of repeats, checking after each request recorded.
func (rc *receiver) wait(what string, cond func(evs []delivered, dups int) bool) []delivered {
	rc.t.Helper()
	return rc.waitLimit(what, deadline, cond)
}

func (rc *receiver) waitLimit(what string, limit time.Duration, cond func(evs []delivered, dups int) bool) []delivered {
	rc.t.Helper()
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	for {
		rc.mu.Lock()
		evs, dups := append([]delivered(nil), rc.events...), rc.dups
		rc.mu.Unlock()
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

// retitle sets a chat's title: one chat.title_changed event.
func retitle(t *testing.T, base, token, id, title string) {
	t.Helper()
	if code, res := do(t, http.MethodPatch, base+"/api/v1/chats/"+id, token, fmt.Sprintf(`{"title": %q}`, title)); code != http.StatusOK {
		t.Fatalf("retitle %s: %d %s", id, code, res)
	}
}
