package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/quota"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
)

// quotaServer is a parley API (no engine) with the quota defaults d on a
// clock that stands still; it returns clients of the admin and of alice.
func quotaServer(t *testing.T, d quota.Limits) (admin, alice *client.Client) {
	t.Helper()
	ctx := context.Background()
	st := sqlitetest.Open(t, t.TempDir())
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "echo", Provider: "echo", Model: "echo"}}
	cfg.DefaultModel = "echo"
	cfg.Quotas.Defaults = d
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	ps := memory.New()
	h, err := api.New(api.Deps{Config: &cfg, Store: st, PubSub: ps, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { ps.Close(); srv.Close() })
	adminTok, _, err := auth.Issue(ctx, st, auth.AdminOwner, "test")
	if err != nil {
		t.Fatal(err)
	}
	aliceTok, _, err := auth.Issue(ctx, st, "alice", "test")
	if err != nil {
		t.Fatal(err)
	}
	return client.New(srv.URL, adminTok), client.New(srv.URL, aliceTok)
}

func TestQuotasAndUsage(t *testing.T) {
	t.Parallel()
	d := quota.Limits{MaxChats: 10, SpendMicrosPerDay: 500}
	admin, alice := quotaServer(t, d)
	ctx := testCtx(t)

	q, err := admin.SetQuotas(ctx, "alice", client.QuotaOverrides{MaxChats: ptr(3), MaxStreams: ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	want := client.OwnerQuotas{Owner: "alice", Defaults: client.Limits{MaxChats: 10, SpendMicrosPerDay: 500},
		Overrides: client.QuotaOverrides{MaxChats: ptr(3), MaxStreams: ptr(0)},
		Effective: client.Limits{MaxChats: 3, SpendMicrosPerDay: 500}}
	if !reflect.DeepEqual(q, want) {
		t.Fatalf("SetQuotas: %+v, want %+v", q, want)
	}
	if q, err = admin.Quotas(ctx, "alice"); err != nil || !reflect.DeepEqual(q, want) {
		t.Fatalf("Quotas: %+v, %v; want %+v", q, err, want)
	}
	_, err = alice.Quotas(ctx, "alice")
	apiError(t, err, http.StatusForbidden, "forbidden")
	_, err = admin.SetQuotas(ctx, "alice", client.QuotaOverrides{Burst: ptr(-1)})
	if ae := apiError(t, err, http.StatusBadRequest, "invalid_field"); ae.Details["field"] != "burst" {
		t.Fatalf("details %v, want field burst", ae.Details)
	}
	_, err = admin.Quotas(ctx, "nobody")
	apiError(t, err, http.StatusNotFound, "not_found")

	u, err := alice.Usage(ctx, client.PeriodMonth, "")
	if err != nil {
		t.Fatal(err)
	}
	wantU := client.UsageReport{Owner: "alice", Period: "month", Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		ResetsAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), Limits: want.Effective}
	if !reflect.DeepEqual(u, wantU) {
		t.Fatalf("Usage: %+v, want %+v", u, wantU)
	}
	if u, err = admin.Usage(ctx, "", "alice"); err != nil || u.Owner != "alice" || u.Period != "day" {
		t.Fatalf("the admin's Usage of alice: %+v, %v", u, err)
	}
	_, err = alice.Usage(ctx, "", "admin")
	apiError(t, err, http.StatusForbidden, "forbidden")
}

func TestRateLimitError(t *testing.T) {
	t.Parallel()
	_, alice := quotaServer(t, quota.Limits{RequestsPerSecond: 0.5, Burst: 1})
	ctx := testCtx(t)
	if _, err := alice.Models(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := alice.Models(ctx)
	var rl *client.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Fatalf("error %v (%T), want a *RateLimitError to retry after 2s", err, err)
	}
	apiError(t, err, http.StatusTooManyRequests, "rate_limited")
}

// TestSpendLimitError reads the 429 of a reached budget, as the API sends
// it, into a *SpendLimitError.
func TestSpendLimitError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"code":"spend_limit_exceeded","message":"the day spend limit of 500 micros is reached",` +
			`"details":{"limit":500,"spent":512,"period":"day","resets_at":"2026-12-06T00:00:00Z","unit":"micros"}}}`))
	}))
	t.Cleanup(srv.Close)
	_, err := client.New(srv.URL, "tok").PostMessage(testCtx(t), "c1", client.PostMessageRequest{Content: "hi"})
	var sl *client.SpendLimitError
	if !errors.As(err, &sl) {
		t.Fatalf("error %v (%T), want a *SpendLimitError", err, err)
	}
	want := client.SpendLimitError{APIError: sl.APIError, Unit: "micros", Limit: 500, Spent: 512, Period: "day",
		ResetsAt: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}
	if !reflect.DeepEqual(*sl, want) {
		t.Fatalf("%+v, want %+v", *sl, want)
	}
	apiError(t, err, http.StatusTooManyRequests, "spend_limit_exceeded")
}

func ptr[T any](v T) *T { return &v }
