package quota_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/quota"
)

// overrides is an OverridesReader of a map, counting its reads.
type overrides struct {
	mu    sync.Mutex
	m     map[string]quota.Overrides
	reads int
}

func (o *overrides) OwnerQuotas(_ context.Context, owner string) (quota.Overrides, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads++
	return o.m[owner], nil
}

func (o *overrides) set(owner string, v quota.Overrides) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[owner] = v
}

func ptr[T any](v T) *T { return &v }

func TestCacheKeepsLimitsForTheTTL(t *testing.T) {
	c := newClock()
	src := &overrides{m: map[string]quota.Overrides{"alice": {MaxStreams: ptr(2)}}}
	cache := quota.NewCache(src, quota.Limits{MaxStreams: 5, MaxChats: 7}, 5*time.Second, c.Now)
	ctx := context.Background()
	want := func(owner string, streams, reads int) {
		t.Helper()
		l, err := cache.Limits(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		if l.MaxStreams != streams || l.MaxChats != 7 {
			t.Fatalf("%s: limits %+v, want max_streams %d and the default max_chats", owner, l, streams)
		}
		if src.reads != reads {
			t.Fatalf("%d reads of the store, want %d", src.reads, reads)
		}
	}
	want("alice", 2, 1)
	want("bob", 5, 2)
	src.set("alice", quota.Overrides{MaxStreams: ptr(3)})
	c.Advance(4 * time.Second)
	want("alice", 2, 2) // cached
	c.Advance(time.Second)
	want("alice", 3, 3) // expired: read again
	src.set("alice", quota.Overrides{})
	cache.Invalidate("alice")
	want("alice", 5, 4) // invalidated: read at once
	want("alice", 5, 4) // and kept again
}
