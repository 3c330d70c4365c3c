package webhook

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/store"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := Policy{Schedule: []time.Duration{5 * time.Second, 5 * time.Minute}, MaxFailures: 3,
		Jitter: func(d time.Duration) time.Duration { return d }}
	cases := []struct {
		name    string
		attempt int
		a       answer
		status  string
		retryIn time.Duration
		disable string
		err     string
	}{
		{"200", 1, answer{code: 200}, store.DeliveryDelivered, 0, "", ""},
		{"204 on the last", 3, answer{code: 204}, store.DeliveryDelivered, 0, "", ""},
		{"410", 1, answer{code: 410}, store.DeliveryFailed, 0, GoneReason, "HTTP 410"},
		{"500", 1, answer{code: 500, snippet: "oops"}, store.DeliveryPending, 5 * time.Second, "", "HTTP 500: oops"},
		{"404 retries too", 2, answer{code: 404}, store.DeliveryPending, 5 * time.Minute, "", "HTTP 404"},
		{"301", 1, answer{code: 301}, store.DeliveryPending, 5 * time.Second, "", "HTTP 301 (redirects are not followed)"},
		{"after the last", 3, answer{code: 503}, store.DeliveryFailed, 0, "", "HTTP 503"},
		{"connection error", 1, answer{err: errors.New("connection refused")}, store.DeliveryPending, 5 * time.Second, "", "connection refused"},
		{"Retry-After seconds", 1, answer{code: 429, retryAfter: "120"}, store.DeliveryPending, 2 * time.Minute, "", "HTTP 429"},
		{"Retry-After shorter than the schedule", 2, answer{code: 429, retryAfter: "1"}, store.DeliveryPending, 5 * time.Minute, "", "HTTP 429"},
		{"Retry-After date", 1, answer{code: 503, retryAfter: now.Add(time.Hour).Format(http.TimeFormat)}, store.DeliveryPending, time.Hour, "", "HTTP 503"},
		{"Retry-After capped", 1, answer{code: 503, retryAfter: "999999999"}, store.DeliveryPending, MaxRetryAfter, "", "HTTP 503"},
		{"Retry-After garbage", 1, answer{code: 503, retryAfter: "soon"}, store.DeliveryPending, 5 * time.Second, "", "HTTP 503"},
		{"Retry-After on the last", 3, answer{code: 429, retryAfter: "5"}, store.DeliveryFailed, 0, "", "HTTP 429"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := p.decide(tc.attempt, tc.a, now)
			if o.Status != tc.status || o.RetryIn != tc.retryIn || o.Disable != tc.disable || o.Error != tc.err ||
				o.StatusCode != tc.a.code {
				t.Fatalf("decide = %+v", o)
			}
		})
	}
}

func TestDefaultJitter(t *testing.T) {
	p := Policy{}
	for range 100 {
		if d := p.jitter(time.Minute); d < time.Minute || d > time.Minute+6*time.Second {
			t.Fatalf("jitter(1m) = %v, want 1m to 1m6s", d)
		}
	}
}

// TestDescribeHidesAddresses checks that a failure to get an answer is
// told in words, without the addresses the HTTP client's errors hold (the
// server's resolver, the peer), and that an answer's body keeps no control
// character (a NUL among them).
func TestDescribeHidesAddresses(t *testing.T) {
	post := func(err error) error { return &url.Error{Op: "Post", URL: "https://user:pw@hooks.example/x", Err: err} }
	dial := func(err error) error {
		return post(&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 9, 8, 7), Port: 443}, Err: err})
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no such host", dial(&net.DNSError{Err: "no such host", Name: "hooks.example", Server: "10.1.2.3:53", IsNotFound: true}),
			"the endpoint's host name does not resolve (no such host)"},
		{"resolver failing", dial(&net.DNSError{Err: "server misbehaving", Name: "hooks.example", Server: "10.1.2.3:53"}),
			"the endpoint's host name could not be looked up"},
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), "the endpoint refused the connection"},
		{"reset", dial(os.NewSyscallError("read", syscall.ECONNRESET)), "the endpoint reset the connection"},
		{"unreachable", dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), "the endpoint's host cannot be reached"},
		{"closed", post(io.EOF), "the endpoint closed the connection without an answer"},
		{"anything else", dial(errors.New("socket: 10.9.8.7:443 said no")), "the request failed before an answer"},
		{"the deliverer's own", errors.New("build the body: event gone"), "build the body: event gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := describe(answer{err: tc.err})
			if got != tc.want || strings.Contains(got, "10.") || strings.Contains(got, "pw") {
				t.Fatalf("describe(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
	if got := printable([]byte("oops\x00\x01 it\tbroke\n")); got != "oops it broke" {
		t.Fatalf("printable = %q", got)
	}
}
