package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RetryPolicy says how often and how patiently a model call is retried.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included; below 2, a
	// failed call is never retried.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the exponential backoff with full jitter:
	// before attempt n+1 the wait is drawn uniformly from
	// [0, min(MaxDelay, BaseDelay*2^(n-1))]. A longer server Retry-After
	// wins over the drawn wait, but no wait is ever longer than MaxDelay
	// (0: no cap).
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// FirstChunkTimeout cancels an attempt that has emitted no event within
	// it and counts that as a retryable "timeout" error; 0 disables it.
	FirstChunkTimeout time.Duration

	// Sleep waits d or until ctx is done; nil uses a real timer. Tests pass
	// a fake clock here.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for the jitter; nil uses math/rand/v2.
	Rand func() float64
}

// DefaultRetryPolicy is the policy used when the configuration sets none.
// The first-chunk timeout is generous because reasoning models may think
// for a long time before their first streamed token.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxAttempts:       4,
		BaseDelay:         500 * time.Millisecond,
		MaxDelay:          30 * time.Second,
		FirstChunkTimeout: 90 * time.Second,
	}
}

// RetryInfo describes a retry about to happen: the engine turns it into the
// chat's `retry` event.
type RetryInfo struct {
	Attempt int           // the attempt about to start: 2 for the first retry
	Delay   time.Duration // the wait before it
	Err     *Error        // why the previous attempt failed
}

// Named is implemented by providers that can say which API they speak
// ("openai", "anthropic", "echo", ...); errors raised around them carry
// that name.
type Named interface {
	Name() string
}

// Retrying wraps p so that a call failing with a retryable *Error is tried
// again, up to policy.MaxAttempts, with exponential backoff and full jitter,
// honouring the server's Retry-After. onRetry, if not nil, is called before
// each wait.
//
// An attempt is retried only if it emitted nothing: once deltas have reached
// the caller (and through it the chat's subscribers), a second attempt would
// stream the answer again from its start, duplicating what they already
// saw, so the error is returned as is and the engine decides (the chat ends
// in error, and POST /retry starts over cleanly).
//
// With a FirstChunkTimeout, an attempt that emits no event in time is
// cancelled and fails with a retryable *Error of kind "timeout". The
// caller's ctx is respected during waits: its cancellation ends the call
// with ctx's error.
func Retrying(p Provider, policy RetryPolicy, onRetry func(RetryInfo)) Provider {
	if policy.Sleep == nil {
		policy.Sleep = sleep
	}
	if policy.Rand == nil {
		policy.Rand = rand.Float64
	}
	return &retrying{p: p, policy: policy, onRetry: onRetry}
}

type retrying struct {
	p       Provider
	policy  RetryPolicy
	onRetry func(RetryInfo)
}

// Name returns the wrapped provider's name, if it has one.
func (r *retrying) Name() string {
	if n, ok := r.p.(Named); ok {
		return n.Name()
	}
	return ""
}

func (r *retrying) Stream(ctx context.Context, req Request, emit func(Event) error) (Result, error) {
	for attempt := 1; ; attempt++ {
		res, emitted, err := r.attempt(ctx, req, emit)
		if err == nil {
			return res, nil
		}
		var perr *Error
		if !errors.As(err, &perr) || !perr.Retryable || emitted || attempt >= r.policy.MaxAttempts || ctx.Err() != nil {
			return res, err
		}
		delay := r.delay(attempt, perr.RetryAfter)
		if r.onRetry != nil {
			r.onRetry(RetryInfo{Attempt: attempt + 1, Delay: delay, Err: perr})
		}
		if err := r.policy.Sleep(ctx, delay); err != nil {
			return Result{}, err
		}
	}
}

// delay is the wait after the given failed attempt (1 for the first).
func (r *retrying) delay(attempt int, retryAfter time.Duration) time.Duration {
	limit := r.policy.MaxDelay
	ceiling := r.policy.BaseDelay
	for i := 1; i < attempt && (limit <= 0 || ceiling < limit); i++ {
		ceiling *= 2
	}
	if limit > 0 {
		ceiling = min(ceiling, limit)
	}
	d := max(time.Duration(r.policy.Rand()*float64(ceiling)), retryAfter)
	if limit > 0 {
		d = min(d, limit)
	}
	return d
}

// attempt makes one call, enforcing the first-chunk timeout, and reports
// whether any event reached emit.
func (r *retrying) attempt(ctx context.Context, req Request, emit func(Event) error) (Result, bool, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()

	const (
		waiting = iota
		started
		timedOut
	)
	var (
		mu    sync.Mutex
		state = waiting
	)
	if t := r.policy.FirstChunkTimeout; t > 0 {
		timer := time.AfterFunc(t, func() {
			mu.Lock()
			defer mu.Unlock()
			if state == waiting {
				state = timedOut
				cancel()
			}
		})
		defer timer.Stop()
	}
	wrapped := func(ev Event) error {
		mu.Lock()
		if state == timedOut {
			mu.Unlock()
			return context.Canceled
		}
		state = started
		mu.Unlock()
		return emit(ev)
	}

	res, err := r.p.Stream(actx, req, wrapped)
	mu.Lock()
	final := state
	mu.Unlock()
	if err != nil && final == timedOut && ctx.Err() == nil {
		return Result{}, false, &Error{
			Kind:      "timeout",
			Provider:  r.Name(),
			Retryable: true,
			Message:   fmt.Sprintf("no output within %s", r.policy.FirstChunkTimeout),
			Err:       err,
		}
	}
	return res, final == started, err
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ParseRetryAfter reads how long a server asks the client to wait from its
// response headers: retry-after-ms (milliseconds, as OpenAI sends it) or
// Retry-After (seconds, or an HTTP date relative to now). It returns 0 when
// neither is present or valid.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
