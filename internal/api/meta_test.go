package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/webui"
)

func TestHealthAndReadiness(t *testing.T) {
	s := newSQLite(t)
	s.do("GET", "/healthz", "", nil).expect(t, http.StatusOK, nil)
	s.do("GET", "/readyz", "", nil).expect(t, http.StatusOK, nil)
	s.st.Close() // the database goes away
	s.do("GET", "/readyz", "", nil).expectError(t, http.StatusServiceUnavailable, "not_ready")
	s.do("GET", "/healthz", "", nil).expect(t, http.StatusOK, nil)
}

func TestModelsAndTools(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	r := s.do("GET", "/api/v1/models", tok, nil)
	var models struct {
		Models []struct {
			Name, Provider, Model string
			Default               bool
		}
	}
	r.expect(t, http.StatusOK, &models)
	if len(models.Models) != 2 || models.Models[0].Name != "echo" || !models.Models[0].Default ||
		models.Models[1].Name != "fast" || models.Models[1].Provider != "openai" || models.Models[1].Model != "gpt-5-mini" || models.Models[1].Default {
		t.Fatalf("models: %s", r.body)
	}
	for _, secret := range []string{"SECRET_KEY_ENV", "127.0.0.1:1", "api_key", "base_url"} {
		if strings.Contains(string(r.body), secret) {
			t.Fatalf("models show %q: %s", secret, r.body)
		}
	}
	r = s.do("GET", "/api/v1/tools", tok, nil)
	r.expect(t, http.StatusOK, nil)
	if strings.TrimSpace(string(r.body)) != `{"sources":[],"tools":[]}` {
		t.Fatalf("tools: %s", r.body)
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	s.do("GET", "/api/v1/nope", tok, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("GET", "/api/nope", "", nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("DELETE", "/api/v1/nope", tok, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("GET", "/nope", "", nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("POST", "/nope", "", nil).expectError(t, http.StatusNotFound, "not_found")
	// / is the web UI's page, for GET and HEAD only.
	r := s.do("POST", "/", "", nil)
	r.expectError(t, http.StatusMethodNotAllowed, "method_not_allowed")
	if allow := r.header.Get("Allow"); allow != "GET, HEAD" {
		t.Fatalf("POST /: Allow %q", allow)
	}
	r = s.do("PUT", "/api/v1/chats", tok, nil)
	r.expectError(t, http.StatusMethodNotAllowed, "method_not_allowed")
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "POST") {
		t.Fatalf("Allow %q", allow)
	}
	s.do("POST", "/healthz", "", nil).expectError(t, http.StatusMethodNotAllowed, "method_not_allowed")
}

// TestWebUI: the web UI is served at / and its files next to the API, with
// its security headers, and takes no path from the API or the facade.
func TestWebUI(t *testing.T) {
	s := newSQLite(t)
	for _, method := range []string{"GET", "HEAD"} {
		r := s.do(method, "/", "", nil)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/html; charset=utf-8" ||
			r.header.Get("ETag") == "" || r.header.Get("Content-Security-Policy") != webui.CSP ||
			r.header.Get("X-Frame-Options") != "DENY" || (method == "GET") != strings.Contains(string(r.body), "<html") {
			t.Errorf("%s / = %d %q, ETag %q, CSP %q, %d bytes", method, r.status, r.header.Get("Content-Type"),
				r.header.Get("ETag"), r.header.Get("Content-Security-Policy"), len(r.body))
		}
	}
	if r := s.do("GET", "/js/nope.js", "", nil); r.status != http.StatusNotFound || r.header.Get("Content-Security-Policy") != webui.CSP {
		t.Errorf("GET /js/nope.js = %d, CSP %q: want the UI's 404", r.status, r.header.Get("Content-Security-Policy"))
	}
	// The API and the facade keep their paths.
	s.do("GET", "/healthz", "", nil).expect(t, http.StatusOK, nil)
	s.do("GET", "/api/v1/chats", "", nil).expectError(t, http.StatusUnauthorized, "unauthorized")
	if r := s.do("GET", "/v1/models", "", nil); r.status != http.StatusUnauthorized || r.header.Get("Content-Security-Policy") != "" {
		t.Errorf("GET /v1/models without a token = %d, CSP %q: want the facade's 401", r.status, r.header.Get("Content-Security-Policy"))
	}
	r := s.do("GET", "/metrics", "", nil)
	if !strings.Contains(string(r.body), `parley_http_requests_total{code="200",method="HEAD",route="GET /{$}"} 1`) ||
		!strings.Contains(string(r.body), `parley_http_requests_total{code="404",method="GET",route="GET /js/"} 1`) {
		t.Errorf("metrics lack the UI's routes:\n%s", r.body)
	}
}

func TestMetrics(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	s.createChat(tok, nil)
	s.do("GET", "/api/v1/chats", tok, nil).expect(t, http.StatusOK, nil)
	s.do("GET", "/api/v1/chats", "", nil).expect(t, http.StatusUnauthorized, nil)
	s.do("GET", "/api/v1/chats/0190a0b4-1d2e-7f00-8000-000000000000", tok, nil).expect(t, http.StatusNotFound, nil)
	s.do("GET", "/nope/1", "", nil).expect(t, http.StatusNotFound, nil)
	s.do("GET", "/nope/2", "", nil).expect(t, http.StatusNotFound, nil)

	r := s.do("GET", "/metrics", "", nil)
	r.expect(t, http.StatusOK, nil)
	body := string(r.body)
	for _, want := range []string{
		`parley_http_requests_total{code="201",method="POST",route="POST /api/v1/chats"} 1`,
		`parley_http_requests_total{code="200",method="GET",route="GET /api/v1/chats"} 1`,
		`parley_http_requests_total{code="401",method="GET",route="GET /api/v1/chats"} 1`,
		`parley_http_requests_total{code="404",method="GET",route="GET /api/v1/chats/{id}"} 1`,
		`parley_http_requests_total{code="404",method="GET",route="unmatched"} 2`,
		`parley_http_request_duration_seconds_bucket{code="201",method="POST",route="POST /api/v1/chats",le="+Inf"} 1`,
		`parley_http_request_duration_seconds_count{code="200",method="GET",route="GET /api/v1/chats"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "/nope/") {
		t.Error("unmatched paths must not become labels")
	}
}
