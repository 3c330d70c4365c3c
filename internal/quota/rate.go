package quota

import (
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateError refuses a request over its token's rate limit.
type RateError struct {
	Owner      string
	Limit      float64       // requests per second
	Burst      int           // requests at once
	RetryAfter time.Duration // until the token may send one more request
}

func (e *RateError) Error() string {
	return fmt.Sprintf("too many requests: this token may send %g per second (%d at once); retry in %d s",
		e.Limit, e.Burst, e.RetryAfterSeconds())
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up and at
// least 1: what the Retry-After header says.
func (e *RateError) RetryAfterSeconds() int64 { return CeilSeconds(e.RetryAfter) }

// MaxRetryAfter bounds the wait a RateError names: a rate at or above
// MinRequestsPerSecond never needs more.
const MaxRetryAfter = 24 * time.Hour

// MinRequestsPerSecond is the slowest requests_per_second a quota may set
// (other than 0, unlimited): one request a day.
const MinRequestsPerSecond = 1.0 / 86400

// CeilSeconds returns d in whole seconds, rounded up, at least 1.
func CeilSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// Rates holds one token bucket per API token, refilled at its owner's
// requests_per_second up to its burst. The buckets are per replica (a
// shared one would cost a database round trip per request): behind n
// replicas a token may send up to n times its rate. It is safe for
// concurrent use.
type Rates struct {
	now func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket // by token id
	pruneAt int                // prune the full buckets once there are this many
}

// bucket is one token's limiter and the limits it was made with.
type bucket struct {
	rps   float64
	burst int
	lim   *rate.Limiter
}

// minPrune is the number of buckets below which none are pruned.
const minPrune = 1024

// NewRates returns empty buckets on the clock now (nil: time.Now).
func NewRates(now func() time.Time) *Rates {
	if now == nil {
		now = time.Now
	}
	return &Rates{now: now, buckets: map[string]*bucket{}, pruneAt: minPrune}
}

// Allow takes one request of the token (its id), which belongs to owner
// with the limits l: nil when it may go on, a *RateError when the token is
// over its rate. A requests_per_second of 0 is unlimited; a burst of 0
// with a rate set is the rate rounded up (at least 1). A token's bucket is
// made anew, full, when its owner's limits changed.
func (r *Rates) Allow(owner, token string, l Limits) error {
	if l.RequestsPerSecond <= 0 {
		r.forget(token)
		return nil
	}
	burst := l.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(l.RequestsPerSecond)))
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[token]
	if b == nil || b.rps != l.RequestsPerSecond || b.burst != burst {
		b = &bucket{rps: l.RequestsPerSecond, burst: burst, lim: rate.NewLimiter(rate.Limit(l.RequestsPerSecond), burst)}
		r.buckets[token] = b
		r.prune(now)
	}
	if b.lim.AllowN(now, 1) {
		return nil
	}
	return &RateError{Owner: owner, Limit: b.rps, Burst: b.burst, RetryAfter: refillWait(1-b.lim.TokensAt(now), b.rps)}
}

// refillWait returns how long a bucket refilled at rps takes to gain
// missing tokens, rounded up to the nanosecond, at most MaxRetryAfter. It
// reckons in float seconds: at a tiny rate the wait in nanoseconds does not
// fit a time.Duration, and a conversion would overflow to a negative wait.
func refillWait(missing, rps float64) time.Duration {
	secs := missing / rps
	if !(secs < MaxRetryAfter.Seconds()) { // NaN and +Inf too
		return MaxRetryAfter
	}
	return time.Duration(math.Ceil(secs * float64(time.Second)))
}

func (r *Rates) forget(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.buckets, token)
}

// prune drops the buckets that are full, which a new bucket would equal,
// once there are many: the map holds the tokens in use, not every token
// ever seen. r.mu is held.
func (r *Rates) prune(now time.Time) {
	if len(r.buckets) < r.pruneAt {
		return
	}
	for id, b := range r.buckets {
		if b.lim.TokensAt(now) >= float64(b.burst) {
			delete(r.buckets, id)
		}
	}
	r.pruneAt = max(minPrune, 2*len(r.buckets))
}
