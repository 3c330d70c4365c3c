package builtin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/parleyhq/parley/tool"
)

// HTTPFetchOptions configure the http_fetch tool; a zero field takes its
// default.
type HTTPFetchOptions struct {
	// AllowPrivate lets http_fetch connect to loopback, private, link-local,
	// unspecified, multicast, CGNAT and other non-public addresses.
	AllowPrivate bool
	// AllowHosts are exceptions to that refusal: host names (matched against
	// the URL's host, case-insensitively), IP addresses or CIDR prefixes.
	AllowHosts []string
	// Timeout bounds one fetch, redirects and body included (default 15s).
	Timeout time.Duration
	// MaxBytes caps the body returned to the model (default 1 MiB); a call's
	// max_bytes may lower it, never raise it.
	MaxBytes int64
}

// Defaults of HTTPFetchOptions.
const (
	DefaultFetchTimeout  = 15 * time.Second
	DefaultFetchMaxBytes = 1 << 20
	maxRedirects         = 5
)

var httpFetchDecl = tool.Decl{
	Name: "http_fetch",
	Description: "Fetches a URL with an HTTP GET and returns the status, content type and body " +
		"(cut at max_bytes; truncated says so). Only public http and https addresses.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"url":{"type":"string","description":"the http or https URL to fetch"},` +
		`"max_bytes":{"type":"integer","minimum":1,"description":"at most this many bytes of the body"}},` +
		`"required":["url"],"additionalProperties":false}`),
	Annotations: tool.ReadOnly(), // a GET changes nothing
}

// HTTPFetch returns the http_fetch tool: {"url", "max_bytes"?} answers
// {"url", "status", "content_type", "body" or "body_base64", "bytes",
// "truncated"}. It refuses non-public addresses unless opts allow them,
// checking each resolved address when it connects, so DNS rebinding and
// redirects to private hosts are refused as well.
func HTTPFetch(opts HTTPFetchOptions) tool.Tool {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultFetchTimeout
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultFetchMaxBytes
	}
	policy := newAddrPolicy(opts)
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would connect on our behalf, past the address check
		DialContext:           policy.Dialer(net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	client := &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return checkScheme(req.URL)
		},
	}
	return &httpFetch{opts: opts, client: client}
}

type httpFetch struct {
	opts   HTTPFetchOptions
	client *http.Client
}

func (f *httpFetch) Decl() tool.Decl { return httpFetchDecl }

func (f *httpFetch) Invoke(ctx context.Context, c tool.Call) (tool.Result, error) {
	var args struct {
		URL      string `json:"url"`
		MaxBytes int64  `json:"max_bytes"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil {
		return tool.Errorf("invalid arguments: %v", err), nil
	}
	u, err := url.Parse(args.URL)
	if err != nil {
		return tool.Errorf("invalid url: %v", err), nil
	}
	if err := checkScheme(u); err != nil {
		return tool.Errorf("%v", err), nil
	}
	limit := f.opts.MaxBytes
	if args.MaxBytes > 0 && args.MaxBytes < limit {
		limit = args.MaxBytes
	}

	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return tool.Errorf("invalid url: %v", err), nil
	}
	req.Header.Set("User-Agent", "parley-http-fetch/1")
	resp, err := f.client.Do(req)
	if err != nil {
		return tool.Errorf("fetch %s: %s", u.Redacted(), fetchError(err)), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return tool.Errorf("fetch %s: read body: %s", u.Redacted(), fetchError(err)), nil
	}
	truncated := int64(len(body)) > limit
	if truncated {
		body = trimToRune(body[:limit])
	}
	out := map[string]any{
		"url":          resp.Request.URL.Redacted(),
		"status":       resp.StatusCode,
		"content_type": resp.Header.Get("Content-Type"),
		"bytes":        len(body),
		"truncated":    truncated,
	}
	if utf8.Valid(body) {
		out["body"] = string(body)
	} else {
		out["body_base64"] = base64.StdEncoding.EncodeToString(body)
	}
	return tool.JSON(out), nil
}

// checkScheme accepts absolute http and https URLs with a host.
func checkScheme(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("only http and https URLs can be fetched, not %q", u.String())
	}
	if u.Host == "" {
		return fmt.Errorf("url %q has no host", u.String())
	}
	return nil
}

// fetchError says what went wrong in words for the model: a refused address
// plainly, a timeout as such, anything else as the client reported it.
func fetchError(err error) string {
	var refused *RefusedError
	if errors.As(err, &refused) {
		return refused.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error()
	}
	return err.Error()
}

// trimToRune drops a rune cut in half at the end of a truncated body, so text
// stays valid UTF-8; a body that is not text is left alone.
func trimToRune(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	for n := 1; n < utf8.UTFMax && n <= len(b); n++ {
		if utf8.Valid(b[:len(b)-n]) {
			return b[:len(b)-n]
		}
	}
	return b
}
