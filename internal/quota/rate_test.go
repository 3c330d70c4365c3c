package quota_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/quota"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// rateErr fails unless err is a *quota.RateError, which it returns.
func rateErr(t *testing.T, err error) *quota.RateError {
	t.Helper()
	var re *quota.RateError
	if !errors.As(err, &re) {
		t.Fatalf("err %v, want a *quota.RateError", err)
	}
	return re
}

func TestRatesBurstRefillRetryAfter(t *testing.T) {
	c := newClock()
	r := quota.NewRates(c.Now)
	l := quota.Limits{RequestsPerSecond: 0.5, Burst: 2}
	for i := range 2 {
		if err := r.Allow("alice", "tok1", l); err != nil {
			t.Fatalf("request %d of the burst: %v", i, err)
		}
	}
	re := rateErr(t, r.Allow("alice", "tok1", l))
	if re.Owner != "alice" || re.RetryAfter != 2*time.Second || re.RetryAfterSeconds() != 2 {
		t.Fatalf("refusal %+v (%d s), want alice, 2s", re, re.RetryAfterSeconds())
	}
	// Another token of the same owner has a bucket of its own.
	if err := r.Allow("alice", "tok2", l); err != nil {
		t.Fatalf("another token: %v", err)
	}
	c.Advance(1500 * time.Millisecond)
	re = rateErr(t, r.Allow("alice", "tok1", l))
	if re.RetryAfter != 500*time.Millisecond || re.RetryAfterSeconds() != 1 {
		t.Fatalf("after 1.5s: retry after %s (%d s), want 500ms rounded up to 1", re.RetryAfter, re.RetryAfterSeconds())
	}
	c.Advance(500 * time.Millisecond)
	if err := r.Allow("alice", "tok1", l); err != nil {
		t.Fatalf("refilled: %v", err)
	}
	rateErr(t, r.Allow("alice", "tok1", l))
}

func TestRatesBurstDefaultsToTheRate(t *testing.T) {
	for _, tc := range []struct {
		rps   float64
		burst int
	}{{0.2, 1}, {1, 1}, {2.5, 3}, {10, 10}} {
		t.Run(fmt.Sprint(tc.rps), func(t *testing.T) {
			r := quota.NewRates(newClock().Now)
			l := quota.Limits{RequestsPerSecond: tc.rps}
			for i := range tc.burst {
				if err := r.Allow("o", "t", l); err != nil {
					t.Fatalf("request %d of %d: %v", i, tc.burst, err)
				}
			}
			if re := rateErr(t, r.Allow("o", "t", l)); re.Burst != tc.burst {
				t.Fatalf("burst %d, want %d", re.Burst, tc.burst)
			}
		})
	}
}

func TestRatesUnlimitedAndChangedLimits(t *testing.T) {
	c := newClock()
	r := quota.NewRates(c.Now)
	for range 1000 {
		if err := r.Allow("o", "t", quota.Limits{}); err != nil {
			t.Fatalf("no rate set: %v", err)
		}
	}
	tight := quota.Limits{RequestsPerSecond: 1, Burst: 1}
	if err := r.Allow("o", "t", tight); err != nil {
		t.Fatal(err)
	}
	rateErr(t, r.Allow("o", "t", tight))
	// Raised limits replace the bucket at once, full.
	loose := quota.Limits{RequestsPerSecond: 1, Burst: 3}
	for i := range 3 {
		if err := r.Allow("o", "t", loose); err != nil {
			t.Fatalf("request %d after the raise: %v", i, err)
		}
	}
	rateErr(t, r.Allow("o", "t", loose))
}

func TestRatesPruneKeepsEmptiedBuckets(t *testing.T) {
	c := newClock()
	r := quota.NewRates(c.Now)
	l := quota.Limits{RequestsPerSecond: 1, Burst: 1}
	if err := r.Allow("o", "busy", l); err != nil {
		t.Fatal(err)
	}
	// Enough other tokens to prune: the busy token's empty bucket stays.
	for i := range 3000 {
		if err := r.Allow("o", fmt.Sprint("t", i), quota.Limits{RequestsPerSecond: 1000, Burst: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	rateErr(t, r.Allow("o", "busy", l))
}

func TestCeilSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{0: 1, time.Nanosecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 59 * time.Second: 59} {
		if got := quota.CeilSeconds(d); got != want {
			t.Errorf("CeilSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

// TestRatesRetryAfterOfATinyRate checks that the wait of a slow rate is
// what the bucket needs, and that a rate too slow for a time.Duration in
// nanoseconds says the cap rather than overflowing to a wait of 1 s (whose
// retry was refused again).
func TestRatesRetryAfterOfATinyRate(t *testing.T) {
	c := newClock()
	r := quota.NewRates(c.Now)
	day := quota.Limits{RequestsPerSecond: quota.MinRequestsPerSecond, Burst: 1}
	if err := r.Allow("o", "slow", day); err != nil {
		t.Fatal(err)
	}
	re := rateErr(t, r.Allow("o", "slow", day))
	if re.RetryAfterSeconds() != 86400 {
		t.Fatalf("one a day: retry after %d s, want 86400", re.RetryAfterSeconds())
	}
	c.Advance(time.Duration(re.RetryAfterSeconds()) * time.Second)
	if err := r.Allow("o", "slow", day); err != nil {
		t.Fatalf("after the Retry-After it named: %v", err)
	}

	for _, rps := range []float64{1e-12, 1e-300} {
		tiny := quota.Limits{RequestsPerSecond: rps, Burst: 1}
		if err := r.Allow("o", fmt.Sprint(rps), tiny); err != nil {
			t.Fatal(err)
		}
		re := rateErr(t, r.Allow("o", fmt.Sprint(rps), tiny))
		if re.RetryAfter != quota.MaxRetryAfter || re.RetryAfterSeconds() != int64(quota.MaxRetryAfter/time.Second) {
			t.Fatalf("rate %g: retry after %s (%d s), want the cap %s", rps, re.RetryAfter, re.RetryAfterSeconds(), quota.MaxRetryAfter)
		}
	}
}

// TestLimitsRefuseARateBelowOneADay checks that a requests_per_second
// slower than the Retry-After cap can name is refused.
func TestLimitsRefuseARateBelowOneADay(t *testing.T) {
	for rps, ok := range map[float64]bool{0: true, quota.MinRequestsPerSecond: true, 5: true, 1e-6: false, 1e-12: false} {
		if err := (quota.Limits{RequestsPerSecond: rps}).Check(); (err == nil) != ok {
			t.Errorf("requests_per_second %g: %v, want ok %v", rps, err, ok)
		}
	}
}
