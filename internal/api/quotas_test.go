package api_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/llm/llmtest"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/service"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/testutil/pgtest"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
)

// newOn starts an API without an engine on backend: "sqlite", or
// "postgres" (pgtest's rules: skipped without a database, failed under CI).
func newOn(t *testing.T, backend string, opts ...func(*setup)) *server {
	t.Helper()
	su := setup{cfg: testConfig(), keepAlive: time.Hour}
	for _, o := range opts {
		o(&su)
	}
	if backend == "postgres" {
		st, ps := pgtest.Replica(t, pgtest.Migrated(t), "parley_test_"+strings.ToLower(rand.Text()[:10]), nil)
		return start(t, st, ps, su)
	}
	return start(t, sqlitetest.Open(t, t.TempDir()), memory.New(), su)
}

// testClock is a clock that moves only when told.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func ptr[T any](v T) *T { return &v }

// setOverrides writes owner's overrides straight into the store.
func (s *server) setOverrides(owner string, o quota.Overrides) {
	s.t.Helper()
	ctx := context.Background()
	if err := s.st.InTx(ctx, func(tx store.Tx) error { return tx.SetOwnerQuotas(ctx, owner, o) }); err != nil {
		s.t.Fatal(err)
	}
}

// quotasPath is the quota route of owner.
func quotasPath(owner string) string { return "/api/v1/owners/" + owner + "/quotas" }

func TestOwnerQuotasRoutes(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		defaults := quota.Limits{SpendMicrosPerDay: 1000, MaxStreams: 3, MaxChats: 10}
		s := newOn(t, backend, func(su *setup) { su.cfg.Quotas.Defaults = defaults })
		admin, alice := s.token(auth.AdminOwner), s.token("alice")

		var q service.OwnerQuotas
		s.do("GET", quotasPath("alice"), admin, nil).expect(t, http.StatusOK, &q)
		if want := (service.OwnerQuotas{Owner: "alice", Defaults: defaults, Effective: defaults}); !reflect.DeepEqual(q, want) {
			t.Fatalf("quotas %+v, want %+v", q, want)
		}
		for _, path := range []string{quotasPath("alice"), quotasPath("admin")} {
			s.do("GET", path, alice, nil).expectError(t, http.StatusForbidden, "forbidden")
			s.do("PUT", path, alice, map[string]any{"max_chats": 100}).expectError(t, http.StatusForbidden, "forbidden")
		}
		s.do("GET", quotasPath("nobody"), admin, nil).expectError(t, http.StatusNotFound, "not_found")
		s.do("PUT", quotasPath("nobody"), admin, map[string]any{"max_chats": 1}).expectError(t, http.StatusNotFound, "not_found")

		// null is the default, 0 unlimited.
		var put service.OwnerQuotas
		s.do("PUT", quotasPath("alice"), admin, `{"max_streams": 5, "max_chats": 0, "spend_micros_per_day": null, "requests_per_second": 2.5}`).
			expect(t, http.StatusOK, &put)
		want := service.OwnerQuotas{Owner: "alice", Defaults: defaults,
			Overrides: quota.Overrides{MaxStreams: ptr(5), MaxChats: ptr(0), RequestsPerSecond: ptr(2.5)},
			Effective: quota.Limits{SpendMicrosPerDay: 1000, MaxStreams: 5, MaxChats: 0, RequestsPerSecond: 2.5}}
		if !reflect.DeepEqual(put, want) {
			t.Fatalf("PUT answered %+v, want %+v", put, want)
		}
		q = service.OwnerQuotas{}
		s.do("GET", quotasPath("alice"), admin, nil).expect(t, http.StatusOK, &q)
		if !reflect.DeepEqual(q, want) {
			t.Fatalf("GET after PUT %+v, want %+v", q, want)
		}

		// Bad values name their key, and change nothing.
		for body, field := range map[string]string{
			`{"max_chats": 1, "burst": -1}`:  "burst",
			`{"spend_micros_per_month": -5}`: "spend_micros_per_month",
			`{"max_chats": 1, "nope": 1}`:    "nope",
			`{"burst": 1.5}`:                 "burst",
			`{"max_streams": "many"}`:        "max_streams",
			`{"requests_per_second": 1e-12}`: "requests_per_second",
		} {
			e := s.do("PUT", quotasPath("alice"), admin, body).expectError(t, http.StatusBadRequest, "invalid_field")
			if e.Error.Details["field"] != field {
				t.Errorf("%s: details %v, want field %q", body, e.Error.Details, field)
			}
		}
		q = service.OwnerQuotas{}
		s.do("GET", quotasPath("alice"), admin, nil).expect(t, http.StatusOK, &q)
		if !reflect.DeepEqual(q, want) {
			t.Fatalf("after refused PUTs %+v, want %+v", q, want)
		}

		// An empty body takes every override back.
		var cleared service.OwnerQuotas
		s.do("PUT", quotasPath("alice"), admin, `{}`).expect(t, http.StatusOK, &cleared)
		if want := (service.OwnerQuotas{Owner: "alice", Defaults: defaults, Effective: defaults}); !reflect.DeepEqual(cleared, want) {
			t.Fatalf("after PUT {}: %+v, want %+v", cleared, want)
		}
	})
}

// TestRateLimitPerToken: each token may send burst requests at once, then
// requests_per_second; over it, 429 rate_limited with Retry-After, on the
// API's clock. An admin's change of the owner's rate holds at once.
func TestRateLimitPerToken(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		clock := newTestClock()
		s := newOn(t, backend, func(su *setup) {
			su.now = clock.Now
			su.cfg.Quotas.Defaults = quota.Limits{RequestsPerSecond: 1, Burst: 2}
		})
		admin := s.token(auth.AdminOwner)
		s.setOverrides(auth.AdminOwner, quota.Overrides{RequestsPerSecond: ptr(0.0)}) // unlimited
		tok1, tok2 := s.token("alice"), s.token("alice")

		limited := func(tok string, retryAfter string) {
			t.Helper()
			r := s.do("GET", "/api/v1/models", tok, nil)
			e := r.expectError(t, http.StatusTooManyRequests, "rate_limited")
			if got := r.header.Get("Retry-After"); got != retryAfter {
				t.Fatalf("Retry-After %q, want %q", got, retryAfter)
			}
			if got := fmt.Sprint(e.Error.Details["retry_after_seconds"]); got != retryAfter {
				t.Fatalf("details %v, want retry_after_seconds %s", e.Error.Details, retryAfter)
			}
		}
		for range 2 {
			s.do("GET", "/api/v1/models", tok1, nil).expect(t, http.StatusOK, nil)
		}
		limited(tok1, "1")
		s.do("GET", "/api/v1/chats", tok2, nil).expect(t, http.StatusOK, nil) // a bucket per token
		clock.Advance(time.Second)
		s.do("GET", "/api/v1/chats", tok1, nil).expect(t, http.StatusOK, nil)
		limited(tok1, "1")

		// A slower rate, set by the admin through this replica: a new
		// bucket at once.
		s.do("PUT", quotasPath("alice"), admin, map[string]any{"requests_per_second": 0.25, "burst": 1}).expect(t, http.StatusOK, nil)
		s.do("GET", "/api/v1/models", tok1, nil).expect(t, http.StatusOK, nil)
		limited(tok1, "4")
		clock.Advance(3 * time.Second)
		limited(tok1, "1")
		clock.Advance(time.Second)
		s.do("GET", "/api/v1/models", tok1, nil).expect(t, http.StatusOK, nil)

		if got := s.metric("parley_quota_refusals_total", `owner="alice",reason="rate_limited"`); got != 4 {
			t.Fatalf("rate_limited refusals of alice: %v, want 4", got)
		}
	})
}

// metric returns the value of the sample of name with exactly these
// labels ("" for none) on /metrics, or -1 if there is none.
func (s *server) metric(name, labels string) float64 {
	s.t.Helper()
	r := s.do("GET", "/metrics", "", nil)
	if r.status != http.StatusOK {
		s.t.Fatalf("GET /metrics: %d %s", r.status, r.body)
	}
	prefix := name + "{" + labels + "} "
	if labels == "" {
		prefix = name + " "
	}
	for line := range strings.SplitSeq(string(r.body), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				s.t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// TestMaxStreams: an owner's open streams, chat streams and feeds alike,
// stop at its max_streams with 429 too_many_streams; a stream that ends
// makes room, and an admin's raise holds at once.
func TestMaxStreams(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s := newOn(t, backend, func(su *setup) {
			su.cfg.Quotas.Defaults.MaxStreams = 2
			su.tokenCheck = 10 * time.Millisecond
		})
		admin, alice, alice2, bob := s.token(auth.AdminOwner), s.token("alice"), s.token("alice"), s.token("bob")
		c := s.createChat(alice, nil)
		feed, _ := s.openSSE("/api/v1/chats/watch", alice, nil, false)
		s.watchChat(alice2, c.ID, streamOpts{})

		for _, path := range []string{"/api/v1/chats/watch", "/api/v1/chats/" + c.ID + "/stream"} {
			e := s.do("GET", path, alice2, nil).expectError(t, http.StatusTooManyRequests, "too_many_streams")
			if e.Error.Details["quota"] != "max_streams" || e.Error.Details["limit"] != 2.0 {
				t.Fatalf("details %v, want quota max_streams, limit 2", e.Error.Details)
			}
		}
		// Alice's chat is a 404 for bob, whatever the count.
		s.do("GET", "/api/v1/chats/"+c.ID+"/stream", bob, nil).expectError(t, http.StatusNotFound, "not_found")
		s.openSSE("/api/v1/chats/watch", bob, nil, false) // bob has streams of his own

		// Revoking alice's first token ends its feed: room for one more.
		if err := s.st.InTx(context.Background(), func(tx store.Tx) error {
			id, _, err := auth.Parse(alice)
			if err != nil {
				return err
			}
			return tx.RevokeToken(context.Background(), id)
		}); err != nil {
			t.Fatal(err)
		}
		feed.end()
		s.openSSE("/api/v1/chats/watch", alice2, nil, false)
		s.do("GET", "/api/v1/chats/watch", alice2, nil).expectError(t, http.StatusTooManyRequests, "too_many_streams")

		s.do("PUT", quotasPath("alice"), admin, map[string]any{"max_streams": 3}).expect(t, http.StatusOK, nil)
		s.openSSE("/api/v1/chats/watch", alice2, nil, false)
		if got := s.metric("parley_quota_refusals_total", `owner="alice",reason="max_streams"`); got != 3 {
			t.Fatalf("max_streams refusals of alice: %v, want 3", got)
		}
	})
}

// newLiveOn starts an API with an engine on backend, its model the fake
// with a price.
func newLiveOn(t *testing.T, backend string, fake *llmtest.OpenAIChat) *server {
	t.Helper()
	cfg := liveConfig(fake.URL)
	cfg.Models[0].Price = &config.Price{InputPerMTok: 1_000_000, OutputPerMTok: 2_000_000}
	s := newOn(t, backend, func(su *setup) { su.cfg = cfg })
	s.live = true
	runEngine(t, s)
	return s
}

// TestUsageAfterAChat: GET /usage sums what the owner's chats recorded in
// the period (an owner its own, the admin anyone's), and the per-owner
// gauges show the day's tokens and spend.
func TestUsageAfterAChat(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		fake := llmtest.NewOpenAIChat(t)
		fake.Push(llmtest.Turn{Text: "hello", Usage: llmtest.Usage{InputTokens: 9, OutputTokens: 21}})
		s := newLiveOn(t, backend, fake)
		admin, alice, bob := s.token(auth.AdminOwner), s.token("alice"), s.token("bob")
		c := s.createChat(alice, map[string]any{"title": "t", "message": "hi"})
		c = s.waitFor(alice, c.ID, chat.Waiting)
		if c.Usage.InputTokens != 9 || c.Usage.OutputTokens != 21 || c.Usage.CostMicros == 0 {
			t.Fatalf("the chat's usage %+v, want 9 in, 21 out, at a cost", c.Usage)
		}

		now := time.Now().UTC()
		for _, tc := range []struct {
			query, token string
			period       quota.Period
		}{
			{"", alice, quota.Day},
			{"?period=month", alice, quota.Month},
			{"?owner=alice", alice, quota.Day},
			{"?owner=alice&period=day", admin, quota.Day},
		} {
			var u service.Usage
			s.do("GET", "/api/v1/usage"+tc.query, tc.token, nil).expect(t, http.StatusOK, &u)
			want := service.Usage{Owner: "alice", Period: tc.period, Start: tc.period.Start(now), ResetsAt: tc.period.End(now),
				Usage: c.Usage, Limits: s.cfg.Quotas.Defaults}
			if !reflect.DeepEqual(u, want) {
				t.Fatalf("usage%s: %+v, want %+v", tc.query, u, want)
			}
		}
		var u service.Usage
		s.do("GET", "/api/v1/usage", bob, nil).expect(t, http.StatusOK, &u)
		if u.Owner != "bob" || u.Usage != (chat.Usage{}) {
			t.Fatalf("bob's usage %+v, want none", u)
		}
		s.do("GET", "/api/v1/usage?owner=alice", bob, nil).expectError(t, http.StatusForbidden, "forbidden")
		s.do("GET", "/api/v1/usage?owner=nobody", admin, nil).expectError(t, http.StatusNotFound, "not_found")
		s.do("GET", "/api/v1/usage?period=week", alice, nil).expectError(t, http.StatusBadRequest, "invalid_query")

		day := `owner="alice",period="day"`
		if got := s.metric("parley_owner_tokens", day); got != 30 {
			t.Fatalf("parley_owner_tokens of alice: %v, want 30", got)
		}
		if got, want := s.metric("parley_owner_spend_micros", day), float64(c.Usage.CostMicros); got != want {
			t.Fatalf("parley_owner_spend_micros of alice: %v, want %v", got, want)
		}
	})
}

// TestOwnerGauges: the queue gauges come from the database at each
// scrape.
func TestOwnerGauges(t *testing.T) {
	onBothStores(t, func(t *testing.T, backend string) {
		s := newOn(t, backend)
		alice := s.token("alice")
		for range 2 {
			c := s.createChat(alice, nil)
			s.force(c.ID, nil, store.Transition{From: chat.Waiting, To: chat.Pending})
		}
		if got := s.metric("parley_owner_queue_depth", `owner="alice"`); got != 2 {
			t.Fatalf("parley_owner_queue_depth of alice: %v, want 2", got)
		}
		if got := s.metric("parley_owner_running", `owner="alice"`); got != 0 {
			t.Fatalf("parley_owner_running of alice: %v, want 0", got)
		}
	})
}

// statsDown is a store whose OwnerStats fails, as when the database is
// out of reach.
type statsDown struct{ store.Store }

func (statsDown) OwnerStats(context.Context, time.Time) ([]store.OwnerStat, error) {
	return nil, store.ErrUnavailable
}

// TestMetricsWithoutTheDatabase: a scrape succeeds without the per-owner
// gauges when the database cannot answer, and says so in the log once.
func TestMetricsWithoutTheDatabase(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	h, err := api.New(api.Deps{Config: testConfig(), Store: statsDown{sqlitetest.Open(t, t.TempDir())}, PubSub: memory.New(),
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "parley_http_requests_total") {
			t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "parley_owner_") {
			t.Fatalf("per-owner gauges without a database:\n%s", rec.Body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "per-owner gauges are left out"); n != 1 {
		t.Fatalf("%d log lines of the failure, want 1:\n%s", n, logs.String())
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
