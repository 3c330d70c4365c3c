package lua

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// maxRedirects bounds the redirects one http.request follows.
const maxRedirects = 10

// allowlist is the hosts http.request may reach. An entry is a host name or
// IP address, optionally with a port ("api.example.com",
// "127.0.0.1:8080", "[::1]:9000"), or "*.example.com" for any subdomain of
// example.com (never an IP address). Without a port any port matches.
type allowlist []allowEntry

type allowEntry struct {
	host     string // lower case, without a trailing dot; the suffix ".example.com" for a wildcard
	wildcard bool
	port     string // "" for any
}

// parseAllowHosts checks and parses allowlist entries.
func parseAllowHosts(entries []string) (allowlist, error) {
	var out allowlist
	for _, e := range entries {
		raw := strings.TrimSpace(e)
		if raw == "" || strings.Contains(raw, "/") {
			return nil, fmt.Errorf("http allowlist entry %q: want a host, host:port or *.domain (no scheme or path)", e)
		}
		host, port := raw, ""
		if h, p, err := net.SplitHostPort(raw); err == nil {
			host, port = h, p
		} else if strings.HasPrefix(raw, "[") && strings.HasSuffix(raw, "]") {
			host = raw[1 : len(raw)-1]
		}
		ent := allowEntry{host: normalHost(host), port: port}
		if rest, ok := strings.CutPrefix(ent.host, "*."); ok {
			if rest == "" || strings.Contains(rest, "*") {
				return nil, fmt.Errorf("http allowlist entry %q: a wildcard must look like *.example.com", e)
			}
			ent.host, ent.wildcard = "."+rest, true
		} else if strings.Contains(ent.host, "*") || ent.host == "" {
			return nil, fmt.Errorf("http allowlist entry %q: a wildcard must look like *.example.com", e)
		}
		out = append(out, ent)
	}
	return out, nil
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// check returns an error unless u's scheme is http(s) and its host is listed.
func (a allowlist) check(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url %q: only http and https are allowed", u.Redacted())
	}
	host := normalHost(u.Hostname())
	if host == "" {
		return fmt.Errorf("url %q has no host", u.Redacted())
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	isIP := net.ParseIP(host) != nil
	for _, e := range a {
		if e.port != "" && e.port != port {
			continue
		}
		if e.wildcard && !isIP && strings.HasSuffix(host, e.host) || !e.wildcard && host == e.host {
			return nil
		}
	}
	return fmt.Errorf("host %s is not in the allowlist of this server (tools.lua_runtime.http_allow_hosts)", net.JoinHostPort(host, port))
}

// newHTTPClient returns the client of a source's http module: it follows
// redirects only to allowed hosts.
func newHTTPClient(allow allowlist) *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return allow.check(req.URL)
		},
	}
}

// httpSpec is one request, read from Lua on the loop and sent off it.
type httpSpec struct {
	method  string
	url     string
	headers map[string]string
	body    string
	timeout time.Duration
}

// httpResponse is what the request answered.
type httpResponse struct {
	status  int
	headers http.Header
	body    []byte
}

// httpRequest is http.request{method=, url=, headers=, body=, timeout=}.
// It returns {status=, headers=, body=} or nil and a message; a host not
// in the allowlist is refused at once, without waiting.
func (r *runner) httpRequest(L *glua.LState) int {
	spec, err := r.httpSpec(L, L.CheckTable(1))
	if err != nil {
		L.ArgError(1, err.Error())
	}
	return r.sendHTTP(L, spec)
}

// httpGet is http.get(url): http.request{url = url}.
func (r *runner) httpGet(L *glua.LState) int {
	return r.sendHTTP(L, httpSpec{method: http.MethodGet, url: L.CheckString(1), timeout: r.src.opts.HTTPTimeout})
}

func (r *runner) sendHTTP(L *glua.LState, spec httpSpec) int {
	u, err := url.Parse(spec.url)
	if err == nil {
		err = r.src.allow.check(u)
	}
	if err != nil {
		L.Push(glua.LNil)
		L.Push(glua.LString(err.Error()))
		return 2
	}
	return r.suspend(L, "http.request", &wait{
		run: func(ctx context.Context) (any, error) { return r.src.doHTTP(ctx, spec) },
		finish: func(v any, err error) []glua.LValue {
			if err != nil {
				return []glua.LValue{glua.LNil, glua.LString(err.Error())}
			}
			return []glua.LValue{r.responseTable(v.(*httpResponse))}
		},
	})
}

// httpSpec reads the request table.
func (r *runner) httpSpec(L *glua.LState, t *glua.LTable) (httpSpec, error) {
	spec := httpSpec{method: http.MethodGet, timeout: r.src.opts.HTTPTimeout}
	str := func(key string) (string, bool, error) {
		switch v := t.RawGetString(key).(type) {
		case *glua.LNilType:
			return "", false, nil
		case glua.LString:
			return string(v), true, nil
		default:
			return "", false, fmt.Errorf("%s must be a string, not a %s", key, v.Type())
		}
	}
	var err error
	var ok bool
	if spec.url, ok, err = str("url"); err != nil || !ok {
		return spec, errors.Join(err, errors.New("url is required"))
	}
	if m, ok, err := str("method"); err != nil {
		return spec, err
	} else if ok {
		spec.method = strings.ToUpper(m)
	}
	if spec.body, _, err = str("body"); err != nil {
		return spec, err
	}
	switch v := t.RawGetString("timeout").(type) {
	case *glua.LNilType:
	case glua.LNumber:
		if f := float64(v); f > 0 && !math.IsInf(f, 0) && f < maxSleep.Seconds() {
			spec.timeout = time.Duration(f * float64(time.Second))
		} else {
			return spec, errors.New("timeout must be a positive number of seconds")
		}
	default:
		return spec, fmt.Errorf("timeout must be a number, not a %s", v.Type())
	}
	switch h := t.RawGetString("headers").(type) {
	case *glua.LNilType:
	case *glua.LTable:
		spec.headers = map[string]string{}
		h.ForEach(func(k, v glua.LValue) {
			if err == nil {
				name, ok := k.(glua.LString)
				if !ok || (v.Type() != glua.LTString && v.Type() != glua.LTNumber) {
					err = fmt.Errorf("headers must map names to strings")
					return
				}
				spec.headers[string(name)] = v.String()
			}
		})
		if err != nil {
			return spec, err
		}
	default:
		return spec, fmt.Errorf("headers must be a table, not a %s", h.Type())
	}
	return spec, nil
}

// doHTTP sends a request off the loop and reads at most MaxResponseBytes.
func (s *Source) doHTTP(ctx context.Context, spec httpSpec) (*httpResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, spec.timeout)
	defer cancel()
	var body io.Reader
	if spec.body != "" {
		body = strings.NewReader(spec.body)
	}
	req, err := http.NewRequestWithContext(ctx, spec.method, spec.url, body)
	if err != nil {
		return nil, err
	}
	for k, v := range spec.headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s %s: timed out", spec.method, req.URL.Redacted())
		}
		return nil, err
	}
	defer resp.Body.Close()
	limit := s.opts.MaxResponseBytes
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the response: %w", spec.method, req.URL.Redacted(), err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s: the response body is larger than %d bytes (tools.lua_runtime.max_response_bytes)", spec.method, req.URL.Redacted(), limit)
	}
	return &httpResponse{status: resp.StatusCode, headers: resp.Header, body: b}, nil
}

// responseTable is {status=, headers=, body=}; header names are lower case
// and repeated headers are joined with ", ".
func (r *runner) responseTable(resp *httpResponse) *glua.LTable {
	headers := newTable()
	for k, v := range resp.headers {
		headers.RawSetString(strings.ToLower(k), glua.LString(strings.Join(v, ", ")))
	}
	t := newTable()
	t.RawSetString("status", glua.LNumber(resp.status))
	t.RawSetString("headers", headers)
	t.RawSetString("body", glua.LString(resp.body))
	return t
}
