package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/internal/netguard"
	"github.com/parleyhq/parley/internal/store"
)

// Policy is what a Deliverer does with an attempt's answer.
type Policy struct {
	// Schedule is the delay before each retry; after the last one the
	// delivery is failed.
	Schedule []time.Duration
	// MaxFailures disables an endpoint once this many of its deliveries
	// failed in a row; 0: never.
	MaxFailures int
	// AllowPrivate lets deliveries connect to private, loopback and
	// link-local addresses.
	AllowPrivate bool
	// Jitter returns the delay to wait for a scheduled one; nil: the delay
	// plus up to a tenth of it, at random, so that the retries of many
	// deliveries that failed together spread out.
	Jitter func(time.Duration) time.Duration
}

func (p Policy) check() error {
	for i, d := range p.Schedule {
		if d <= 0 {
			return fmt.Errorf("webhook: retry schedule[%d] %v: want a positive delay", i, d)
		}
	}
	if p.MaxFailures < 0 {
		return fmt.Errorf("webhook: MaxFailures %d: want 0 or more", p.MaxFailures)
	}
	return nil
}

// MaxRetryAfter caps a Retry-After header honoured.
const MaxRetryAfter = 24 * time.Hour

// answer is how an attempt ended: an HTTP status (with its Retry-After
// and the start of its body), or an error before any answer.
type answer struct {
	code       int
	retryAfter string
	snippet    string
	err        error
}

// GoneReason is the reason of an endpoint disabled for answering 410.
const GoneReason = "the endpoint answered 410 Gone"

// decide turns the answer to the attempt-th attempt into the outcome to
// record: 2xx delivered; 410 failed, disabling the endpoint; anything else
// (a 3xx: redirects are not followed; a 4xx, a 5xx, a timeout, a refused
// or failed connection) another attempt after the schedule's next delay,
// or after Retry-After when it asks for longer (capped at MaxRetryAfter),
// and failed after the last one.
func (p Policy) decide(attempt int, a answer, now time.Time) store.DeliveryOutcome {
	o := store.DeliveryOutcome{StatusCode: a.code, MaxFailures: p.MaxFailures}
	switch {
	case a.err == nil && a.code >= 200 && a.code < 300:
		o.Status = store.DeliveryDelivered
		return o
	case a.err == nil && a.code == http.StatusGone:
		o.Status, o.Disable, o.Error = store.DeliveryFailed, GoneReason, "HTTP 410"
		return o
	}
	o.Error = describe(a)
	if attempt > len(p.Schedule) {
		o.Status = store.DeliveryFailed
		return o
	}
	o.Status = store.DeliveryPending
	o.RetryIn = p.jitter(p.Schedule[attempt-1])
	if ra, ok := parseRetryAfter(a.retryAfter, now); ok && ra > o.RetryIn {
		o.RetryIn = min(ra, MaxRetryAfter)
	}
	return o
}

func (p Policy) jitter(d time.Duration) time.Duration {
	if p.Jitter != nil {
		return p.Jitter(d)
	}
	return d + rand.N(d/10+1)
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(MaxRetryAfter/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// maxSnippet bounds the part of an answer's body kept in last_error.
const maxSnippet = 200

// describe is an unsuccessful answer in words, for last_error. It never
// holds the URL (which may carry credentials).
func describe(a answer) string {
	if a.err != nil {
		var refused *netguard.RefusedError
		var uerr *url.Error
		switch {
		case errors.As(a.err, &refused):
			return refused.Error() + " (webhooks.allow_private is off)"
		case errors.Is(a.err, context.DeadlineExceeded) || errors.As(a.err, &uerr) && uerr.Timeout():
			return "timed out waiting for the answer"
		case errors.As(a.err, &uerr):
			return uerr.Err.Error()
		}
		return a.err.Error()
	}
	s := "HTTP " + strconv.Itoa(a.code)
	if a.code >= 300 && a.code < 400 {
		s += " (redirects are not followed)"
	}
	if a.snippet != "" {
		s += ": " + a.snippet
	}
	return s
}

// maxDrain is how much of an answer's body is read (and dropped) so the
// connection can be reused.
const maxDrain = 64 << 10

// post sends the body of c's event to its endpoint, signed.
func (d *Deliverer) post(ctx context.Context, c store.ClaimedDelivery, body []byte) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Endpoint.URL, bytes.NewReader(body))
	if err != nil {
		return answer{err: fmt.Errorf("invalid endpoint url: %w", err)}
	}
	now := time.Now()
	sig, err := Sign(c.Endpoint.Secrets(now), c.Event.ID, now, body)
	if err != nil {
		return answer{err: err}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "parley-webhooks")
	h.Set("webhook-id", c.Event.ID)
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", sig)
	res, err := d.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(res.Body, maxSnippet))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, maxDrain))
	return answer{code: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), snippet: printable(head)}
}

// printable keeps the valid UTF-8 text of b on one line.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "")
	s = strings.Join(strings.Fields(s), " ")
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// body returns the event's body, building and storing it on its first
// attempt (every attempt, of every endpoint, then sends the same bytes).
func (d *Deliverer) body(ctx context.Context, ev store.WebhookEvent) ([]byte, error) {
	if ev.Body != nil {
		return ev.Body, nil
	}
	b, err := BuildBody(ctx, d.cfg.Store, d.cfg.Tools, ev)
	if err != nil {
		return nil, err
	}
	return d.cfg.Store.SetEventBody(ctx, ev.ID, b)
}

// finishTimeout bounds the write of an attempt's outcome, also when the
// deliverer is stopping.
const finishTimeout = 10 * time.Second

// attempt makes one attempt of a claimed delivery and records its outcome.
func (d *Deliverer) attempt(ctx context.Context, c store.ClaimedDelivery) {
	start := time.Now()
	var a answer
	body, err := d.body(ctx, c.Event)
	if err != nil {
		a = answer{err: fmt.Errorf("build the body: %w", err)}
	} else {
		a = d.post(ctx, c, body)
	}
	var o store.DeliveryOutcome
	if a.code == 0 && ctx.Err() != nil {
		// Cut short by the deliverer stopping: due again at once, for
		// another replica (or this one, restarted).
		o = store.DeliveryOutcome{Status: store.DeliveryPending, Error: "cut short: the server was stopping"}
	} else {
		o = d.policy.decide(c.Delivery.Attempts+1, a, time.Now())
	}
	o.ID, o.WorkerID = c.Delivery.ID, d.cfg.WorkerID
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := d.cfg.Store.FinishDelivery(fctx, o); err != nil {
		d.log.Warn("record webhook attempt", "delivery", c.Delivery.ID, "event", c.Event.ID, "err", err)
		return
	}
	d.cfg.Metrics.observe(o, a, time.Since(start))
	log := d.log.With("delivery", c.Delivery.ID, "event", c.Event.ID, "type", c.Event.Type,
		"endpoint", c.Endpoint.ID, "attempt", c.Delivery.Attempts+1, "status", o.Status, "http_status", a.code)
	switch {
	case o.Disable != "" || o.Status == store.DeliveryFailed:
		log.Warn("webhook delivery failed", "error", o.Error)
	case o.Status == store.DeliveryPending:
		log.Info("webhook attempt failed; retrying", "error", o.Error, "retry_in", o.RetryIn)
	default:
		log.Debug("webhook delivered")
	}
}
