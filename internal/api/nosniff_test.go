package api_test

import (
	"net/http"
	"testing"
)

// TestNoSniff: every JSON answer of the API, successes and errors of every
// kind (the handlers', authentication's, the router's), carries
// X-Content-Type-Options: nosniff, and so do both event streams (openSSE
// checks it). expect checks it on every other test's JSON answers too.
func TestNoSniff(t *testing.T) {
	s := newSQLite(t)
	tok := s.token("alice")
	c := s.createChat(tok, map[string]any{"title": "sniff"})
	chat := "/api/v1/chats/" + c.ID
	cases := []struct {
		method, path, token string
		body                any
		status              int
	}{
		{"GET", "/healthz", "", nil, http.StatusOK},
		{"GET", "/api/v1/models", tok, nil, http.StatusOK},
		{"POST", "/api/v1/chats", tok, map[string]any{"title": "x"}, http.StatusCreated},
		{"GET", chat, tok, nil, http.StatusOK},
		{"POST", chat + "/messages", tok, map[string]any{"content": "hi"}, http.StatusAccepted},
		{"POST", "/api/v1/chats", tok, `{"title": `, http.StatusBadRequest},
		{"GET", chat, "", nil, http.StatusUnauthorized},
		{"GET", chat, s.token("bob"), nil, http.StatusNotFound},
		{"POST", chat + "/tool-results", tok, map[string]any{"results": []any{}}, http.StatusConflict},
		{"GET", "/api/v1/nope", tok, nil, http.StatusNotFound},
		{"PUT", "/api/v1/chats", tok, nil, http.StatusMethodNotAllowed},
	}
	for _, tc := range cases {
		r := s.do(tc.method, tc.path, tc.token, tc.body)
		if r.status != tc.status {
			t.Fatalf("%s %s: status %d, want %d; body %s", tc.method, tc.path, r.status, tc.status, r.body)
		}
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q, want nosniff", tc.method, tc.path, r.status, got)
		}
	}
	s.openSSE(chat+"/stream", tok, nil, false)
	s.openSSE("/api/v1/chats/watch", tok, nil, false)
}
