package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/testutil/hookrecv"
	"github.com/parleyhq/parley/internal/testutil/parleybin"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
)

// TestWebhookReplicasDeliverOnce runs two replicas on one PostgreSQL
// database; clients change the titles of a few chats, each change through
// one replica or the other. While the receiver answers 2xx at once, every
// event arrives exactly once (no webhook-id twice) and none is lost: 500
// events.
func TestWebhookReplicasDeliverOnce(t *testing.T) {
	t.Parallel()
	const chats, n = 10, 500
	dsn := pgtest.DSN(t)
	pgtest.Store(t, dsn) // its cleanup checks the histories once the replicas stopped
	dir := t.TempDir()
	a, b := startReplicas(t, dir, dsn, parleybin.FakeModelConfig(t, dir, "http://127.0.0.1:1", webhooksConfig))
	replicas := []*replica{a, b}
	rc := hookrecv.New(t)
	ep := createWebhook(t, a.URL, a.Token, rc, `["chat.title_changed"]`)
	ids := make([]string, chats)
	for c := range ids {
		ids[c] = createTitled(t, replicas[c%2].URL, a.Token, fmt.Sprintf("chat %d", c))
	}

	// One client per chat, so the changes come at once, as many clients
	// make them; each change goes through the other replica than the last.
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for c, id := range ids {
		wg.Go(func() {
			for i := c; i < n; i += chats {
				r := replicas[i%2]
				if code, res := send(http.MethodPatch, r.URL+"/api/v1/chats/"+id, a.Token, fmt.Sprintf(`{"title": "event %d"}`, i)); code != http.StatusOK {
					errs <- fmt.Errorf("event %d: %d %s", i, code, res)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	made := time.Since(start)
	evs := rc.WaitEvents(n, 20*time.Second)
	t.Logf("%d events made in %v by %d clients; all received %v after the first change",
		n, made.Round(time.Millisecond), chats, time.Since(start).Round(time.Millisecond))
	_, dups := rc.Snapshot()
	if dups != 0 || len(evs) != n {
		t.Fatalf("%d events, %d duplicate deliveries; want %d and none", len(evs), dups, n)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		title := e.Body.Data.Title
		if e.Body.Type != "chat.title_changed" || !strings.HasPrefix(title, "event ") || seen[title] {
			t.Fatalf("event %s: %+v (a change twice, or another event)", e.ID, e.Body)
		}
		seen[title] = true
	}
	for i := range n {
		if !seen[fmt.Sprintf("event %d", i)] {
			t.Errorf("no event of change %d", i)
		}
	}
	ds := waitDeliveries(t, a.URL, a.Token, ep.ID, fmt.Sprintf("%d delivered", n), allDelivered(n))
	for _, d := range ds {
		if d.Attempts != 1 {
			t.Fatalf("delivery %+v: want delivered in one attempt", d)
		}
	}
	// Each replica counts what it delivered: together, each event once.
	var per []int
	total := 0
	for _, r := range replicas {
		v := deliveredCount(t, r)
		per = append(per, v)
		total += v
	}
	t.Logf("delivered by each replica: %v", per)
	if total != n {
		t.Errorf("the replicas count %d deliveries (%v), want %d", total, per, n)
	}
	for _, r := range replicas {
		if code := r.Stop(); code != 0 {
			t.Errorf("a replica exited %d\nstderr:\n%s", code, r.Stderr)
		}
	}
}

// send is do for goroutines: it returns a transport error as status 0.
func send(method, url, token, body string) (int, string) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: deadline}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	var sb strings.Builder
	_, _ = io.Copy(&sb, res.Body)
	return res.StatusCode, sb.String()
}

// deliveredCount reads a replica's parley_webhook_deliveries_total{result="delivered"}.
func deliveredCount(t *testing.T, r *replica) int {
	t.Helper()
	code, body := get(t, r.URL+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	for l := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), `parley_webhook_deliveries_total{result="delivered"} `); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("metric line %q: %v", l, err)
			}
			return n
		}
	}
	return 0 // not counted yet: none delivered
}
