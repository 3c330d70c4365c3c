package main

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestWebhookReplicasDeliverOnce runs two replicas on one PostgreSQL
// database and makes many events, alternating between the replicas: while
// the receiver answers 2xx at once, every event arrives exactly once (no
// webhook-id twice) and none is lost. CI makes 100 events; PARLEY_BENCH=1
// makes 500.
func TestWebhookReplicasDeliverOnce(t *testing.T) {
	t.Parallel()
	n := 100
	if os.Getenv("PARLEY_BENCH") == "1" {
		n = 500
	}
	dsn := pgtest.DSN(t)
	pgtest.Store(t, dsn) // its cleanup checks the histories once the replicas stopped
	dir := t.TempDir()
	a, b := startReplicas(t, dir, dsn, fakeModelConfig(t, dir, "http://127.0.0.1:1", webhooksConfig))
	rc := newReceiver(t)
	ep := createWebhook(t, a.url, a.token, rc, `["chat.title_changed"]`)
	id := createTitled(t, b.url, a.token, "title 0")

	start := time.Now()
	for i := 1; i <= n; i++ {
		r := []*replica{a, b}[i%2]
		retitle(t, r.url, a.token, id, fmt.Sprintf("title %d", i))
	}
	made := time.Since(start)
	evs := rc.waitEvents(n, 20*time.Second)
	t.Logf("%d events made in %v, all received %v after the first change", n, made.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	_, dups := rc.snapshot()
	if dups != 0 || len(evs) != n {
		t.Fatalf("%d events, %d duplicate deliveries; want %d and none", len(evs), dups, n)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		if e.body.Type != "chat.title_changed" || e.body.Data.ID != id || seen[e.body.Data.Title] {
			t.Fatalf("event %s: %+v (a title twice, or another event)", e.id, e.body)
		}
		seen[e.body.Data.Title] = true
	}
	for i := 1; i <= n; i++ {
		if !seen[fmt.Sprintf("title %d", i)] {
			t.Errorf("no event of title %d", i)
		}
	}
	ds := deliveries(t, a.url, a.token, ep.ID)
	if len(ds) != n {
		t.Fatalf("the API lists %d deliveries, want %d", len(ds), n)
	}
	for _, d := range ds {
		if d.Status != "delivered" || d.Attempts != 1 {
			t.Fatalf("delivery %+v: want delivered in one attempt", d)
		}
	}
	for _, r := range []*replica{a, b} {
		if code := r.stop(); code != 0 {
			t.Errorf("a replica exited %d\nstderr:\n%s", code, r.stderr)
		}
	}
}
