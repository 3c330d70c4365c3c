package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/testutil/hookrecv"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
)

// webhooksConfig lets serve deliver to the tests' receivers on 127.0.0.1
// and retries at once.
const webhooksConfig = `webhooks:
  allow_private: true
  retry_schedule: ["50ms", "50ms", "50ms"]
`

// webhookEndpoint is the part of an endpoint the tests read.
type webhookEndpoint struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// createWebhook creates an endpoint for rc's URL, subscribed to events (a
// JSON array), and gives rc its secret.
func createWebhook(t *testing.T, base, token string, rc *hookrecv.Receiver, events string) webhookEndpoint {
	t.Helper()
	code, res := do(t, http.MethodPost, base+"/api/v1/webhooks", token,
		fmt.Sprintf(`{"url": %q, "events": %s}`, rc.URL(), events))
	var ep webhookEndpoint
	if code != http.StatusCreated || json.Unmarshal([]byte(res), &ep) != nil || ep.ID == "" || ep.Secret == "" {
		t.Fatalf("create webhook: %d %s", code, res)
	}
	rc.SetSecret(ep.Secret)
	return ep
}

// createTitled creates a chat with a title and no message (the model is
// not called) and returns its id.
func createTitled(t *testing.T, base, token, title string) string {
	t.Helper()
	code, res := do(t, http.MethodPost, base+"/api/v1/chats", token, fmt.Sprintf(`{"title": %q}`, title))
	var c chat.Chat
	if code != http.StatusCreated || json.Unmarshal([]byte(res), &c) != nil || c.ID == "" {
		t.Fatalf("create chat: %d %s", code, res)
	}
	return c.ID
}

// retitle sets a chat's title: one chat.title_changed event.
func retitle(t *testing.T, base, token, id, title string) {
	t.Helper()
	if code, res := do(t, http.MethodPatch, base+"/api/v1/chats/"+id, token, fmt.Sprintf(`{"title": %q}`, title)); code != http.StatusOK {
		t.Fatalf("retitle %s: %d %s", id, code, res)
	}
}

// apiDelivery is the part of a delivery the tests read.
type apiDelivery struct {
	ID        json.RawMessage `json:"id"`
	EventID   string          `json:"event_id"`
	EventType string          `json:"event_type"`
	Status    string          `json:"status"`
	Attempts  int             `json:"attempts"`
}

// deliveries reads every delivery of an endpoint, following the pages.
func deliveries(t *testing.T, base, token, endpoint string) []apiDelivery {
	t.Helper()
	var all []apiDelivery
	cursor := ""
	for {
		code, res := get(t, base+"/api/v1/webhooks/"+endpoint+"/deliveries?limit=100&cursor="+cursor, token)
		var page struct {
			Deliveries []apiDelivery `json:"deliveries"`
			NextCursor string        `json:"next_cursor"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(res), &page) != nil {
			t.Fatalf("deliveries of %s: %d %s", endpoint, code, res)
		}
		all = append(all, page.Deliveries...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// waitDeliveries reads an endpoint's deliveries until cond holds of them,
// within deadline, and returns them: the receiver has a request before the
// sender records its answer.
func waitDeliveries(t *testing.T, base, token, endpoint, what string, cond func([]apiDelivery) bool) []apiDelivery {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ds := deliveries(t, base, token, endpoint)
		if cond(ds) {
			return ds
		}
		if time.Now().After(end) {
			t.Fatalf("the deliveries of %s: not %s within %v: %+v", endpoint, what, deadline, ds)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// allDelivered reports whether there are n deliveries, all delivered.
func allDelivered(n int) func([]apiDelivery) bool {
	return func(ds []apiDelivery) bool {
		for _, d := range ds {
			if d.Status != "delivered" {
				return false
			}
		}
		return len(ds) == n
	}
}

// TestWebhookOutboxSurvivesKill: three title changes commit while the
// receiver is down (it answers 503), so every event waits in the outbox
// for a retry; serve is SIGKILLed then. After a restart on the same
// database, with the receiver up, every event arrives, each once as far as
// a receiver that dedupes on webhook-id can tell, and the API lists them
// delivered after more than one attempt.
// TestWebhookKilledMidAttempt: the server is SIGKILLed while the receiver
// holds an attempt unanswered. After a restart the endpoint's claim runs
// out (twice webhooks.timeout, 1 s here) and the event is sent again, with
// the same webhook-id, and recorded delivered.
func TestWebhookKilledMidAttempt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	t.Cleanup(func() { parleybin.CheckHistories(t, filepath.Join(dataDir, "parley.db")) })
	cfg := parleybin.FakeModelConfig(t, dir, "http://127.0.0.1:1", `webhooks:
  allow_private: true
  timeout: 1s
`)
	env := []string{parleybin.FakeKeyEnv + "=test-key"}
	args := []string{"--config", cfg, "--data-dir", dataDir}
	s := startServe(t, dir, env, args...)
	token := s.Token

	rc := hookrecv.New(t)
	held := make(chan string, 1) // the webhook-id of the attempt held
	release := make(chan struct{})
	var first atomic.Bool
	first.Store(true)
	rc.Before = func(w http.ResponseWriter, r *http.Request) bool {
		if !first.CompareAndSwap(true, false) {
			return false
		}
		held <- r.Header.Get("webhook-id")
		<-release // the answer never reaches the killed sender
		return true
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	ep := createWebhook(t, s.URL, token, rc, `["chat.title_changed"]`)
	id := createTitled(t, s.URL, token, "title 0")
	retitle(t, s.URL, token, id, "title 1")
	var heldID string
	select {
	case heldID = <-held:
	case <-time.After(deadline):
		t.Fatal("no attempt reached the receiver")
	}
	if err := s.Cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	s.Wait()
	close(release)

	s = startServe(t, dir, env, args...)
	evs := rc.WaitEvents(1, deadline)
	if len(evs) != 1 || evs[0].ID != heldID || evs[0].Body.Data.Title != "title 1" {
		t.Fatalf("received %+v; want the held event %s again", evs, heldID)
	}
	ds := waitDeliveries(t, s.URL, token, ep.ID, "1 delivered", allDelivered(1))
	if ds[0].EventID != heldID || ds[0].Attempts != 1 {
		t.Errorf("delivery %+v: want event %s delivered at its first recorded attempt (the killed one left no record)", ds[0], heldID)
	}
	if code := s.Stop(); code != 0 {
		t.Errorf("serve exited %d\nstderr:\n%s", code, s.Stderr)
	}
}

func TestWebhookOutboxSurvivesKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	// Registered before the servers' own cleanups, so it runs after them.
	t.Cleanup(func() { parleybin.CheckHistories(t, filepath.Join(dataDir, "parley.db")) })
	// The first retry comes 2 s after a failed attempt: the kill and the
	// restart happen meanwhile.
	cfg := parleybin.FakeModelConfig(t, dir, "http://127.0.0.1:1", `webhooks:
  allow_private: true
  retry_schedule: ["2s", "2s", "2s", "2s", "2s"]
`)
	env := []string{parleybin.FakeKeyEnv + "=test-key"}
	args := []string{"--config", cfg, "--data-dir", dataDir}
	s := startServe(t, dir, env, args...)
	token := s.Token

	rc := hookrecv.New(t)
	var down atomic.Bool
	down.Store(true)
	rc.Before = func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	ep := createWebhook(t, s.URL, token, rc, `["chat.title_changed"]`)
	id := createTitled(t, s.URL, token, "title 0")
	for i := 1; i <= 3; i++ {
		retitle(t, s.URL, token, id, fmt.Sprintf("title %d", i))
	}
	// Every event is committed, and its first attempt recorded: none is
	// in the middle of an attempt, whose lease would hold it back.
	waitDeliveries(t, s.URL, token, ep.ID, "3, each failed once", func(ds []apiDelivery) bool {
		failed := 0
		for _, d := range ds {
			if d.Status == "pending" && d.Attempts >= 1 {
				failed++
			}
		}
		return len(ds) == 3 && failed == 3
	})
	if err := s.Cmd.Process.Kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	s.Wait()
	if evs, _ := rc.Snapshot(); len(evs) != 0 {
		t.Fatalf("the receiver accepted %d events while down", len(evs))
	}

	down.Store(false)
	s = startServe(t, dir, env, args...)
	evs := rc.WaitEvents(3, 15*time.Second)
	ids := map[string]bool{}
	titles := map[string]bool{}
	for _, e := range evs {
		ids[e.ID] = true
		titles[e.Body.Data.Title] = true
		if e.Body.Type != "chat.title_changed" || e.Body.Data.ID != id {
			t.Errorf("event %s: %+v", e.ID, e.Body)
		}
	}
	if len(evs) != 3 || !titles["title 1"] || !titles["title 2"] || !titles["title 3"] {
		t.Errorf("received %d events with titles %v, want title 1, 2 and 3", len(evs), titles)
	}
	ds := waitDeliveries(t, s.URL, token, ep.ID, "3 delivered", allDelivered(3))
	for _, d := range ds {
		if d.Attempts < 2 || !ids[d.EventID] {
			t.Errorf("delivery %+v: want delivered after a failed attempt, of an event the receiver got", d)
		}
	}
	_, dups := rc.Snapshot()
	t.Logf("after the restart: %d events, %d duplicate requests", len(evs), dups)
	if code := s.Stop(); code != 0 {
		t.Errorf("serve exited %d\nstderr:\n%s", code, s.Stderr)
	}
}
