package quota

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultCacheTTL is how long a replica keeps an owner's effective limits
// before it reads them again.
const DefaultCacheTTL = 5 * time.Second

// OverridesReader reads one owner's overrides; the store implements it.
type OverridesReader interface {
	// OwnerQuotas returns the owner's overrides (none set: the zero
	// value); store.ErrNotFound if the owner does not exist.
	OwnerQuotas(ctx context.Context, owner string) (Overrides, error)
}

// Cache keeps owners' effective limits (the defaults with each owner's
// overrides) in memory, so a request does not read the database for them.
// It is per replica: a change made through another replica takes effect
// here within the TTL; Invalidate makes a change made through this replica
// take effect at once. It is safe for concurrent use.
type Cache struct {
	r        OverridesReader
	defaults Limits
	ttl      time.Duration
	now      func() time.Time

	mu      sync.Mutex
	gen     uint64 // bumped by Invalidate: a read begun before it is not kept
	entries map[string]cacheEntry
}

type cacheEntry struct {
	limits  Limits
	expires time.Time
}

// NewCache returns a cache over r. A ttl <= 0 is DefaultCacheTTL; a nil now
// is time.Now.
func NewCache(r OverridesReader, defaults Limits, ttl time.Duration, now func() time.Time) *Cache {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Cache{r: r, defaults: defaults, ttl: ttl, now: now, entries: map[string]cacheEntry{}}
}

// Defaults returns the limits every owner has unless overridden.
func (c *Cache) Defaults() Limits { return c.defaults }

// Limits returns the owner's effective limits, read from the store when the
// cached ones are older than the TTL.
func (c *Cache) Limits(ctx context.Context, owner string) (Limits, error) {
	c.mu.Lock()
	e, ok := c.entries[owner]
	gen := c.gen
	c.mu.Unlock()
	now := c.now()
	if ok && now.Before(e.expires) {
		return e.limits, nil
	}
	o, err := c.r.OwnerQuotas(ctx, owner)
	if err != nil {
		return Limits{}, fmt.Errorf("quotas of %s: %w", owner, err)
	}
	l := o.Apply(c.defaults)
	c.mu.Lock()
	if c.gen == gen {
		c.entries[owner] = cacheEntry{limits: l, expires: now.Add(c.ttl)}
	}
	c.mu.Unlock()
	return l, nil
}

// Invalidate forgets the owner's cached limits: the next request reads them
// again.
func (c *Cache) Invalidate(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.entries, owner)
}
