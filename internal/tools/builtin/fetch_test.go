package builtin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fetchServer serves /text, /binary, /slow, and /redirect (to /secret on
// 127.0.0.1); it counts the requests that reach /secret and /text.
type fetchServer struct {
	*httptest.Server
	hits atomic.Int32
}

func newFetchServer(t *testing.T) *fetchServer {
	s := &fetchServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "héllo wörld, this is a body of some length")
	})
	mux.HandleFunc("/secret", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		fmt.Fprint(w, "secret")
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0xff, 0xfe, 0x00, 0x01})
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.URL+"/secret", http.StatusFound) // s.URL is http://127.0.0.1:port
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// localhostURL is the server's URL with the host name localhost instead of
// the IP, so only name resolution tells it is loopback.
func (s *fetchServer) localhostURL(path string) string {
	return strings.Replace(s.URL, "127.0.0.1", "localhost", 1) + path
}

func fetchArgs(url string, extra string) string {
	return fmt.Sprintf(`{"url":%q%s}`, url, extra)
}

func TestHTTPFetchRefusesNonPublicAddresses(t *testing.T) {
	srv := newFetchServer(t)
	f := HTTPFetch(HTTPFetchOptions{})
	for _, url := range []string{srv.URL + "/text", srv.localhostURL("/text"), "http://[::1]:1/", "http://0.0.0.0:1/"} {
		out := invoke(t, f, fetchArgs(url, ""))
		msg, _ := out["error"].(string)
		if !strings.Contains(msg, "refused to connect") {
			t.Errorf("%s: got %v, want a refusal", url, out)
		}
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times", n)
	}
}

func TestHTTPFetchAllowed(t *testing.T) {
	srv := newFetchServer(t)
	cases := []struct {
		name string
		opts HTTPFetchOptions
		url  string
	}{
		{"AllowPrivate", HTTPFetchOptions{AllowPrivate: true}, srv.URL + "/text"},
		{"AllowHosts IP", HTTPFetchOptions{AllowHosts: []string{"127.0.0.1"}}, srv.URL + "/text"},
		{"AllowHosts CIDR", HTTPFetchOptions{AllowHosts: []string{"127.0.0.0/8"}}, srv.localhostURL("/text")},
		{"AllowHosts name", HTTPFetchOptions{AllowHosts: []string{"LocalHost"}}, srv.localhostURL("/text")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := invoke(t, HTTPFetch(tc.opts), fetchArgs(tc.url, ""))
			if out["status"] != float64(200) || out["body"] != "héllo wörld, this is a body of some length" ||
				out["content_type"] != "text/plain; charset=utf-8" || out["truncated"] != false {
				t.Fatalf("got %v", out)
			}
		})
	}

	out := invoke(t, HTTPFetch(HTTPFetchOptions{AllowPrivate: true}), fetchArgs(srv.URL+"/missing", ""))
	if out["status"] != float64(404) {
		t.Fatalf("a 404 answers its status, got %v", out)
	}
}

// TestHTTPFetchRefusesRedirectToLoopback: the first host is allowed by name,
// the redirect target (127.0.0.1) is not, and is refused when it is dialled.
func TestHTTPFetchRefusesRedirectToLoopback(t *testing.T) {
	srv := newFetchServer(t)
	f := HTTPFetch(HTTPFetchOptions{AllowHosts: []string{"localhost"}})
	out := invoke(t, f, fetchArgs(srv.localhostURL("/redirect"), ""))
	if msg, _ := out["error"].(string); !strings.Contains(msg, "refused to connect to 127.0.0.1: a loopback address") {
		t.Fatalf("got %v, want the redirect refused", out)
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("the redirect target was reached %d times", n)
	}
}

func TestHTTPFetchBodyCap(t *testing.T) {
	srv := newFetchServer(t)
	cases := []struct {
		name  string
		opts  HTTPFetchOptions
		extra string
		body  string
	}{
		{"max_bytes", HTTPFetchOptions{AllowPrivate: true}, `,"max_bytes":5`, "héll"},
		{"cut rune dropped", HTTPFetchOptions{AllowPrivate: true}, `,"max_bytes":2`, "h"},
		{"server cap wins", HTTPFetchOptions{AllowPrivate: true, MaxBytes: 8}, `,"max_bytes":1000`, "héllo w"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := invoke(t, HTTPFetch(tc.opts), fetchArgs(srv.URL+"/text", tc.extra))
			if out["body"] != tc.body || out["truncated"] != true || out["bytes"] != float64(len(tc.body)) {
				t.Fatalf("got %v, want body %q truncated", out, tc.body)
			}
		})
	}
	out := invoke(t, HTTPFetch(HTTPFetchOptions{AllowPrivate: true}), fetchArgs(srv.URL+"/binary", ""))
	if out["body_base64"] != "//4AAQ==" || out["body"] != nil {
		t.Fatalf("binary body: %v", out)
	}
}

func TestHTTPFetchBadURLs(t *testing.T) {
	f := HTTPFetch(HTTPFetchOptions{AllowPrivate: true})
	for _, url := range []string{"file:///etc/passwd", "ftp://example.com/x", "example.com/page", "http://", "http://a b/"} {
		out := invoke(t, f, fetchArgs(url, ""))
		msg, _ := out["error"].(string)
		if !strings.Contains(msg, "only http and https") && !strings.Contains(msg, "no host") && !strings.Contains(msg, "invalid url") {
			t.Errorf("%s: got %v, want a refusal of the URL", url, out)
		}
	}
}

func TestHTTPFetchTimeout(t *testing.T) {
	srv := newFetchServer(t)
	f := HTTPFetch(HTTPFetchOptions{AllowPrivate: true, Timeout: 100 * time.Millisecond})
	start := time.Now()
	out := invoke(t, f, fetchArgs(srv.URL+"/slow", ""))
	if msg, _ := out["error"].(string); !strings.Contains(msg, "timed out") {
		t.Fatalf("got %v", out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
}
