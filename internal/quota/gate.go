package quota

import (
	"context"
	"errors"
	"time"
)

// Gate holds an owner's requests and streams on one replica to its
// effective limits: a rate per API token (Rates) and a cap on open streams
// (Streams), both per replica, on limits a Cache keeps for a few seconds.
// It is safe for concurrent use.
type Gate struct {
	cache   *Cache
	rates   *Rates
	streams Streams
}

// NewGate returns a gate over the owners' overrides in r, with the defaults
// and the clock now (nil: time.Now).
func NewGate(r OverridesReader, defaults Limits, now func() time.Time) *Gate {
	return &Gate{cache: NewCache(r, defaults, DefaultCacheTTL, now), rates: NewRates(now)}
}

// Limits returns the owner's effective limits (cached).
func (g *Gate) Limits(ctx context.Context, owner string) (Limits, error) {
	return g.cache.Limits(ctx, owner)
}

// Defaults returns the limits every owner has unless overridden.
func (g *Gate) Defaults() Limits { return g.cache.Defaults() }

// Invalidate makes the owner's next request read its limits again: after
// they changed through this replica.
func (g *Gate) Invalidate(owner string) { g.cache.Invalidate(owner) }

// Admit counts one request of owner's token (its id) against the token's
// rate: a *RateError when it is over.
func (g *Gate) Admit(ctx context.Context, owner, token string) error {
	l, err := g.cache.Limits(ctx, owner)
	if err != nil {
		return err
	}
	return g.rates.Allow(owner, token, l)
}

// OpenStream counts one more open stream of owner: a *CapError (Key
// "max_streams") when its max_streams are open already on this replica.
// release must be called when the stream ends.
func (g *Gate) OpenStream(ctx context.Context, owner string) (release func(), err error) {
	l, err := g.cache.Limits(ctx, owner)
	if err != nil {
		return nil, err
	}
	return g.streams.Open(owner, l.MaxStreams)
}

// Refusal reports whether err refuses a request for one of the owner's
// quotas, whose owner and reason it returns: "rate_limited", "spend_limit",
// "token_limit", or a cap's key ("max_streams", "max_chats", ...).
func Refusal(err error) (owner, reason string, ok bool) {
	var (
		re *RateError
		ee *ExceededError
		ce *CapError
	)
	switch {
	case errors.As(err, &re):
		return re.Owner, "rate_limited", true
	case errors.As(err, &ee):
		if ee.Unit == "tokens" {
			return ee.Owner, "token_limit", true
		}
		return ee.Owner, "spend_limit", true
	case errors.As(err, &ce):
		return ce.Owner, ce.Key, true
	}
	return "", "", false
}
