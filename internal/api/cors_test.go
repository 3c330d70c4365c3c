package api_test

import (
	"net/http"
	"testing"
)

func TestCORS(t *testing.T) {
	s := newSQLite(t, func(su *setup) { su.cfg.CORS.AllowedOrigins = []string{"https://app.example.com"} })
	for _, path := range []string{"/api/v1/ai-sdk/chat", "/v1/chat/completions"} {
		req, _ := http.NewRequest("OPTIONS", s.url+path, nil)
		req.Header.Set("Origin", "https://app.example.com")
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		h := res.Header
		if res.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
			h.Get("Access-Control-Allow-Headers") != "Authorization, Content-Type" || h.Get("Vary") != "Origin" {
			t.Fatalf("preflight of %s: %d %v", path, res.StatusCode, h)
		}
	}
	// An origin not listed gets no CORS headers; an allowed one gets its own, never "*".
	for origin, want := range map[string]string{"https://evil.example.com": "", "https://app.example.com": "https://app.example.com"} {
		req, _ := http.NewRequest("GET", s.url+"/api/v1/models", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Authorization", "Bearer "+s.token("alice"))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("Access-Control-Allow-Origin"); got != want || res.StatusCode != http.StatusOK {
			t.Fatalf("origin %s: %d allow-origin %q, want %q", origin, res.StatusCode, got, want)
		}
	}
}
