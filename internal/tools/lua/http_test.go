package lua

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

const httpScript = `
tool{name = "get", handler = function(input)
  local resp, err = http.get(input.url)
  if not resp then return nil, err end
  return {status = resp.status, body = resp.body, type = resp.headers["content-type"]}
end}
tool{name = "post", handler = function(input)
  local resp, err = http.request{
    method = "POST", url = input.url, body = json.encode({q = input.q}),
    headers = {["Content-Type"] = "application/json", ["X-Token"] = "t0k"},
    timeout = input.timeout,
  }
  if not resp then return nil, err end
  return {status = resp.status, echo = json.decode(resp.body)}
end}
tool{name = "bad_request", handler = function() return http.request{method = "GET"} end}
`

// echoServer answers /echo with the request it got, /big with 2 KiB,
// /slow after five seconds and /redirect with a redirect to ?to=.
func echoServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"method":%q,"type":%q,"token":%q,"body":%q}`, r.Method, r.Header.Get("Content-Type"), r.Header.Get("X-Token"), body)
		case "/big":
			w.Write([]byte(strings.Repeat("x", 2048)))
		case "/slow":
			io.Copy(io.Discard, r.Body) // so the server notices the client leaving
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPAllowedHost(t *testing.T) {
	srv := echoServer(t)
	s := openSource(t, httpScript, func(o *Options) { o.AllowHosts = []string{"127.0.0.1"} })
	got := okJSON(t, invokeOne(t, s, "post", fmt.Sprintf(`{"url":%q,"q":"rain"}`, srv.URL+"/echo")))
	want := `{"echo":{"body":"{\"q\":\"rain\"}","method":"POST","token":"t0k","type":"application/json"},"status":200}`
	if got != want {
		t.Errorf("post: %s, want %s", got, want)
	}
	got = okJSON(t, invokeOne(t, s, "get", fmt.Sprintf(`{"url":%q}`, srv.URL+"/nowhere")))
	if !strings.Contains(got, `"status":404`) || !strings.Contains(got, `"type":"text/plain; charset=utf-8"`) {
		t.Errorf("get 404: %s", got)
	}
}

func TestHTTPRefusesHostsNotAllowed(t *testing.T) {
	srv := echoServer(t)
	u, _ := url.Parse(srv.URL)
	cases := []struct {
		allow []string
		url   string
		want  string
	}{
		{nil, srv.URL + "/echo", "host 127.0.0.1:" + u.Port() + " is not in the allowlist"},
		{[]string{"localhost"}, srv.URL + "/echo", "is not in the allowlist"},
		{[]string{"127.0.0.1:1"}, srv.URL + "/echo", "is not in the allowlist"},
		{[]string{"*.0.0.1"}, srv.URL + "/echo", "is not in the allowlist"},
		{[]string{"127.0.0.1"}, "file:///etc/passwd", "only http and https are allowed"},
		{[]string{"127.0.0.1"}, srv.URL + "/redirect?to=http://localhost:" + u.Port() + "/echo", "is not in the allowlist"},
		{[]string{"127.0.0.1"}, srv.URL + "/big", "larger than 1000 bytes"},
	}
	for _, c := range cases {
		s := openSource(t, httpScript, func(o *Options) {
			o.AllowHosts = c.allow
			o.MaxResponseBytes = 1000
		})
		msg := errText(t, invokeOne(t, s, "get", fmt.Sprintf(`{"url":%q}`, c.url)))
		if !strings.Contains(msg, c.want) {
			t.Errorf("allow %q, get %s: %q, want %q", c.allow, c.url, msg, c.want)
		}
	}
}

func TestHTTPTimeoutAndBadRequests(t *testing.T) {
	srv := echoServer(t)
	s := openSource(t, httpScript, func(o *Options) { o.AllowHosts = []string{"127.0.0.1:" + strings.Split(srv.URL, ":")[2]} })
	start := time.Now()
	msg := errText(t, invokeOne(t, s, "post", fmt.Sprintf(`{"url":%q,"q":"x","timeout":0.1}`, srv.URL+"/slow")))
	if !strings.Contains(msg, "timed out") || time.Since(start) > 3*time.Second {
		t.Errorf("timeout: %q after %s", msg, time.Since(start))
	}
	if msg := errText(t, invokeOne(t, s, "bad_request", `{}`)); !strings.Contains(msg, "url is required") {
		t.Errorf("no url: %q", msg)
	}
}

func TestParseAllowHosts(t *testing.T) {
	a, err := parseAllowHosts([]string{"API.example.com.", "*.example.org", "10.0.0.1:8080", "[::1]:9000", "[::2]"})
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]bool{
		"https://api.example.com/x":      true,
		"http://api.example.com:8080/":   true,
		"https://other.example.com/":     false,
		"https://a.b.example.org/":       true,
		"https://example.org/":           false,
		"https://badexample.org/":        false,
		"http://10.0.0.1:8080/":          true,
		"http://10.0.0.1/":               false,
		"http://[::1]:9000/":             true,
		"http://[::1]:9001/":             false,
		"https://[::2]/":                 true,
		"ftp://api.example.com/":         false,
		"https://api.example.com@evil/":  false,
		"https://evil/?api.example.com":  false,
		"https://api.example.com.evil/":  false,
		"https://API.EXAMPLE.COM./upper": true,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.check(u) == nil; got != want {
			t.Errorf("%s: allowed %v, want %v", raw, got, want)
		}
	}
	for _, bad := range []string{"", "http://x.com", "x.com/path", "*", "*.", "a.*.com", "**.com"} {
		if _, err := parseAllowHosts([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
