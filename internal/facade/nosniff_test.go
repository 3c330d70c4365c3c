package facade_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/llm/llmtest"
)

// TestNoSniff checks that every kind of facade answer, JSON, errors and
// streams of both APIs, tells browsers not to sniff its type: a chat's
// text is the client's, and could look like HTML. (Every other test checks
// it too, through the replica's client.)
func TestNoSniff(t *testing.T) {
	r, fake := newSQLite(t)
	tok := r.token("alice")
	fake.Push(llmtest.Turn{Text: "one"}, llmtest.Turn{Text: "two"}, llmtest.Turn{Text: "three"})
	cases := []struct {
		name, method, path, tok, body string
		status                        int
		ctype                         string
	}{
		{"models", "GET", "/v1/models", tok, "", http.StatusOK, "application/json"},
		{"no key", "GET", "/v1/models", "", "", http.StatusUnauthorized, "application/json"},
		{"unknown route", "POST", "/v1/embeddings", tok, `{}`, http.StatusNotFound, "application/json"},
		{"bad body", "POST", "/v1/chat/completions", tok, `{`, http.StatusBadRequest, "application/json"},
		{"completion", "POST", "/v1/chat/completions", tok, `{"model":"fake","messages":[{"role":"user","content":"<html>"}]}`,
			http.StatusOK, "application/json"},
		{"completion stream", "POST", "/v1/chat/completions", tok, `{"model":"fake","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			http.StatusOK, "text/event-stream"},
		{"response stream", "POST", "/v1/responses", tok, `{"model":"fake","stream":true,"input":"hi"}`,
			http.StatusOK, "text/event-stream"},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, r.url+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.tok != "" {
			req.Header.Set("Authorization", "Bearer "+c.tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != c.status || !strings.HasPrefix(res.Header.Get("Content-Type"), c.ctype) {
			t.Fatalf("%s: %d %s, want %d %s", c.name, res.StatusCode, res.Header.Get("Content-Type"), c.status, c.ctype)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", c.name, got)
		}
	}
}
