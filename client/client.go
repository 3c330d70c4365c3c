// Package client is the Go client of parley's HTTP API (docs/api.md).
//
// A Client has one typed method per route, readers for the per-chat event
// stream (Stream) and the owner's feed (Watch) that reconnect and resume on
// their own, and a Runner that serves a program's dynamic tools: register
// typed handlers with Handle, declare r.Tools() when creating chats, and
// r.Run answers every call the model makes to them.
//
// Calls of server-side tools that need a person's approval wait in the
// chat's RequiredAction with Kind ActionApproval: decide on them with Decide
// (Approve, ApproveWithArgs, Deny), or give the Runner an approver
// (WithApprover). See docs/approvals.md.
//
// Errors the server answers are *APIError values; use errors.As to read the
// status, the stable code and the details. Two 429s have types of their
// own, which unwrap to the *APIError: *RateLimitError (the token sent too
// many requests; RetryAfter says when to send again) and *SpendLimitError
// (the owner's spend or token budget is reached until ResetsAt).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 1 << 20

// Client talks to one parley server with one token. It is safe for
// concurrent use.
type Client struct {
	base    *url.URL
	baseErr error // why baseURL did not parse
	token   string
	http    *http.Client

	minDelay, maxDelay time.Duration // stream reconnect backoff
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client requests go through; the default is
// an http.Client without a timeout (streams stay open for hours: bound
// single requests with their context).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithReconnectDelay sets the backoff of Stream and Watch between failed
// connection attempts: min first, doubling up to max. The defaults are
// 100ms and 5s. A stream that the server ended cleanly (or with a resync)
// reconnects at once.
func WithReconnectDelay(min, max time.Duration) Option {
	return func(c *Client) { c.minDelay, c.maxDelay = min, max }
}

// New returns a client of the server at baseURL (like
// "http://127.0.0.1:8080") authenticating with token. A baseURL that does
// not parse makes every request fail with the parse error.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{token: token, http: &http.Client{}, minDelay: 100 * time.Millisecond, maxDelay: 5 * time.Second}
	c.base, c.baseErr = url.Parse(strings.TrimRight(baseURL, "/"))
	if c.baseErr == nil && (c.base.Scheme == "" || c.base.Host == "") {
		c.baseErr = fmt.Errorf("base URL %q: want http://HOST:PORT", baseURL)
	}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.minDelay <= 0 {
		c.minDelay = 100 * time.Millisecond
	}
	if c.maxDelay < c.minDelay {
		c.maxDelay = c.minDelay
	}
	return c
}

// APIError is an error answer of the server: {"error": {"code", "message",
// "details"}} with its HTTP status.
type APIError struct {
	StatusCode int            // the HTTP status, like 409
	Code       string         // stable, for programs: "status_conflict", "not_found", ...
	Message    string         // for people
	Details    map[string]any // structured details, when the server sent some
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.StatusCode, e.Code, e.Message)
}

// IsStatus reports whether err is an *APIError with the HTTP status code.
func IsStatus(err error, code int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == code
}

// RateLimitError is a 429 "rate_limited": the token sent more requests
// than its rate allows.
type RateLimitError struct {
	*APIError
	RetryAfter time.Duration // wait at least this long before the next request
}

func (e *RateLimitError) Unwrap() error { return e.APIError }

// SpendLimitError is a 429 "spend_limit_exceeded": the owner's spend or
// token budget of the period is reached, and new work is refused until it
// resets or the admin raises it.
type SpendLimitError struct {
	*APIError
	Unit     string // "micros" (spend, in micro-dollars) or "tokens"
	Limit    int64
	Spent    int64
	Period   string // PeriodDay or PeriodMonth
	ResetsAt time.Time
}

func (e *SpendLimitError) Unwrap() error { return e.APIError }

// typedError returns the error type of ae's code: a *RateLimitError, a
// *SpendLimitError, or ae.
func typedError(res *http.Response, ae *APIError) error {
	switch ae.Code {
	case "rate_limited":
		secs, err := strconv.ParseInt(res.Header.Get("Retry-After"), 10, 64)
		if err != nil {
			f, _ := ae.Details["retry_after_seconds"].(float64)
			secs = int64(f)
		}
		return &RateLimitError{APIError: ae, RetryAfter: time.Duration(secs) * time.Second}
	case "spend_limit_exceeded":
		e := &SpendLimitError{APIError: ae}
		e.Unit, _ = ae.Details["unit"].(string)
		e.Period, _ = ae.Details["period"].(string)
		limit, _ := ae.Details["limit"].(float64)
		spent, _ := ae.Details["spent"].(float64)
		e.Limit, e.Spent = int64(limit), int64(spent)
		if s, ok := ae.Details["resets_at"].(string); ok {
			e.ResetsAt, _ = time.Parse(time.RFC3339Nano, s)
		}
		return e
	}
	return ae
}

// request builds a request of the API; path is below the base URL, like
// "/api/v1/chats".
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body any) (*http.Request, error) {
	if c.baseErr != nil {
		return nil, fmt.Errorf("parley client: %w", c.baseErr)
	}
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends a JSON request and decodes a 2xx answer into out (when not nil);
// any other answer is an *APIError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	req, err := c.request(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("%s %s: %w", method, path, decodeError(res))
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, res.Body)
		return nil
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// decodeError reads an error answer. A body that is not the API's error
// shape (a proxy's page) still gives an *APIError with the status.
func decodeError(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	var body struct {
		Error *struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error != nil {
		return typedError(res, &APIError{StatusCode: res.StatusCode, Code: body.Error.Code, Message: body.Error.Message, Details: body.Error.Details})
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(res.StatusCode)
	}
	return &APIError{StatusCode: res.StatusCode, Code: "http_" + fmt.Sprint(res.StatusCode), Message: msg}
}
