package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
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
	o := store.DeliveryOutcome{StatusCode: a.code}
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
// holds the URL (which may carry credentials) nor an address the server
// used (its resolver's, a peer's): an owner reads it.
func describe(a answer) string {
	if a.err != nil {
		return describeErr(a.err)
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

// describeErr is a failure to get an answer in words. An error of the
// HTTP client (a *url.Error) is named by its kind, never by its text,
// which holds addresses ("lookup x on 10.0.0.2:53: ..."); any other error
// is the deliverer's own and says what it is.
func describeErr(err error) string {
	var (
		refused *netguard.RefusedError
		uerr    *url.Error
		dns     *net.DNSError
		cert    *tls.CertificateVerificationError
		record  tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &refused):
		return refused.Error() + " (webhooks.allow_private is off)"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &uerr) && uerr.Timeout():
		return "timed out waiting for the answer"
	case !errors.As(err, &uerr):
		return err.Error()
	case errors.As(err, &dns) && dns.IsNotFound:
		return "the endpoint's host name does not resolve (no such host)"
	case errors.As(err, &dns):
		return "the endpoint's host name could not be looked up"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the endpoint refused the connection"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "the endpoint reset the connection"
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return "the endpoint's host cannot be reached"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "the endpoint closed the connection without an answer"
	case errors.As(err, &cert):
		return "the endpoint's TLS certificate was not accepted"
	case errors.As(err, &record):
		return "the endpoint does not speak TLS (is the URL's scheme right?)"
	}
	return "the request failed before an answer"
}

// maxDrain is how much of an answer's body is read (and dropped) so the
// connection can be reused.
const maxDrain = 64 << 10

// post sends the body of an event to the endpoint e, signed.
func (d *Deliverer) post(ctx context.Context, e store.WebhookEndpoint, eventID string, body []byte) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return answer{err: fmt.Errorf("invalid endpoint url: %w", err)}
	}
	now := time.Now()
	sig, err := Sign(e.Secrets(now), eventID, now, body)
	if err != nil {
		return answer{err: err}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "parley-webhooks")
	h.Set("webhook-id", eventID)
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

// printable keeps the valid UTF-8 text of b on one line, without control
// characters (a NUL among them).
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// bodies returns the bodies of the batch's events, building and storing
// those sent for the first time (every attempt, of every endpoint, then
// sends the same bytes); an event whose body could not be had is missing,
// and the error says why.
func (d *Deliverer) bodies(ctx context.Context, b store.DeliveryBatch) (map[string][]byte, error) {
	out := make(map[string][]byte, len(b.Deliveries))
	fresh := map[string][]byte{}
	var errs []error
	for _, c := range b.Deliveries {
		ev := c.Event
		if ev.Body != nil {
			out[ev.ID] = ev.Body
			continue
		}
		if _, ok := fresh[ev.ID]; ok {
			continue
		}
		body, err := BuildBody(ctx, d.cfg.Store, d.cfg.Tools, ev)
		if err != nil {
			errs = append(errs, fmt.Errorf("event %s: %w", ev.ID, err))
			continue
		}
		fresh[ev.ID] = body
	}
	if len(fresh) > 0 {
		stored, err := d.cfg.Store.SetEventBodies(ctx, fresh)
		if err != nil {
			return out, errors.Join(append(errs, err)...)
		}
		maps.Copy(out, stored)
	}
	return out, errors.Join(errs...)
}

// finishTimeout bounds the write of a batch's outcomes, also when the
// deliverer is stopping.
const finishTimeout = 10 * time.Second

// attempted is an attempt and what became of it.
type attempted struct {
	c    store.ClaimedDelivery
	a    answer
	o    store.DeliveryOutcome
	took time.Duration
}

// deliver sends a claimed batch to its endpoint, one delivery at a time,
// in order, and records the outcomes. The batch stops at the first attempt
// that is not delivered (the later deliveries do not overtake it within
// the batch), and when until has passed or the deliverer is stopping: the
// deliveries not attempted stay due for the next claim.
func (d *Deliverer) deliver(ctx context.Context, claimID string, until time.Time, b store.DeliveryBatch) {
	bodies, bodyErr := d.bodies(ctx, b)
	var done []attempted
	for i, c := range b.Deliveries {
		if ctx.Err() != nil || (i > 0 && time.Now().After(until)) {
			break
		}
		start := time.Now()
		var a answer
		if body, ok := bodies[c.Event.ID]; ok {
			a = d.post(ctx, b.Endpoint, c.Event.ID, body)
		} else {
			a = answer{err: fmt.Errorf("build the body: %w", bodyErr)}
		}
		var o store.DeliveryOutcome
		if a.code == 0 && ctx.Err() != nil {
			// Cut short by the deliverer stopping: due again at once, for
			// another replica (or this one, restarted).
			o = store.DeliveryOutcome{Status: store.DeliveryPending, Error: "cut short: the server was stopping"}
		} else {
			o = d.policy.decide(c.Delivery.Attempts+1, a, time.Now())
		}
		o.ID = c.Delivery.ID
		done = append(done, attempted{c: c, a: a, o: o, took: time.Since(start)})
		if o.Status != store.DeliveryDelivered {
			break
		}
	}
	outcomes := make([]store.DeliveryOutcome, len(done))
	for i, at := range done {
		outcomes[i] = at.o
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	err := d.cfg.Store.FinishDeliveries(fctx, store.BatchOutcome{ClaimID: claimID, EndpointID: b.Endpoint.ID,
		Outcomes: outcomes, MaxFailures: d.policy.MaxFailures})
	if err != nil {
		d.log.Warn("record webhook attempts", "endpoint", b.Endpoint.ID, "attempts", len(done), "err", err)
		return
	}
	for _, at := range done {
		d.cfg.Metrics.observe(at.o, at.a, at.took)
		d.logAttempt(b.Endpoint, at)
	}
}

// logAttempt logs an attempt recorded: at Debug when delivered.
func (d *Deliverer) logAttempt(e store.WebhookEndpoint, at attempted) {
	c, o := at.c, at.o
	log := d.log.With("delivery", c.Delivery.ID, "event", c.Event.ID, "type", c.Event.Type,
		"endpoint", e.ID, "attempt", c.Delivery.Attempts+1, "status", o.Status, "http_status", at.a.code)
	switch {
	case o.Disable != "" || o.Status == store.DeliveryFailed:
		log.Warn("webhook delivery failed", "error", o.Error)
	case o.Status == store.DeliveryPending:
		log.Info("webhook attempt failed; retrying", "error", o.Error, "retry_in", o.RetryIn)
	default:
		log.Debug("webhook delivered")
	}
}
