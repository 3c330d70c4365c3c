package quota_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/parleyhq/parley/internal/quota"
)

func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("wrapped: %w", &quota.RateError{Owner: "a"}), "rate_limited"},
		{&quota.ExceededError{Owner: "a", Unit: "micros"}, "spend_limit"},
		{&quota.ExceededError{Owner: "a", Unit: "tokens"}, "token_limit"},
		{&quota.CapError{Owner: "a", Key: "max_chats"}, "max_chats"},
	} {
		owner, reason, ok := quota.Refusal(tc.err)
		if !ok || owner != "a" || reason != tc.reason {
			t.Errorf("Refusal(%v) = %q, %q, %v; want a, %q", tc.err, owner, reason, ok, tc.reason)
		}
	}
	if _, _, ok := quota.Refusal(errors.New("other")); ok {
		t.Error("another error is a refusal")
	}
}

// TestGateAdmitsExactlyTheBurstAtOnce: requests of one token that arrive
// together get exactly its burst, no more, whatever their interleaving.
func TestGateAdmitsExactlyTheBurstAtOnce(t *testing.T) {
	c := newClock()
	src := &overrides{m: map[string]quota.Overrides{"alice": {RequestsPerSecond: ptr(0.001), Burst: ptr(5)}}}
	g := quota.NewGate(src, quota.Limits{}, c.Now)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			<-release
			err := g.Admit(context.Background(), "alice", "tok")
			var re *quota.RateError
			switch {
			case err == nil:
				admitted.Add(1)
			case !errors.As(err, &re):
				t.Error(err)
			}
		})
	}
	close(release)
	wg.Wait()
	if n := admitted.Load(); n != 5 {
		t.Fatalf("%d admitted, want the burst of 5", n)
	}
}

// TestGateInvalidate: the owner's new limits hold at once after
// Invalidate, for the rate and the streams alike.
func TestGateInvalidate(t *testing.T) {
	c := newClock()
	ctx := context.Background()
	src := &overrides{m: map[string]quota.Overrides{}}
	g := quota.NewGate(src, quota.Limits{RequestsPerSecond: 1, Burst: 1, MaxStreams: 1}, c.Now)
	if err := g.Admit(ctx, "alice", "tok"); err != nil {
		t.Fatal(err)
	}
	if err := g.Admit(ctx, "alice", "tok"); err == nil {
		t.Fatal("over the burst: admitted")
	}
	release, err := g.OpenStream(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := g.OpenStream(ctx, "alice"); err == nil {
		t.Fatal("over max_streams: opened")
	}
	src.set("alice", quota.Overrides{RequestsPerSecond: ptr(0.0), MaxStreams: ptr(2)})
	if err := g.Admit(ctx, "alice", "tok"); err == nil {
		t.Fatal("the cached limits changed before Invalidate")
	}
	g.Invalidate("alice")
	if err := g.Admit(ctx, "alice", "tok"); err != nil {
		t.Fatalf("unlimited after Invalidate: %v", err)
	}
	if _, err := g.OpenStream(ctx, "alice"); err != nil {
		t.Fatalf("a second stream after the raise: %v", err)
	}
}
