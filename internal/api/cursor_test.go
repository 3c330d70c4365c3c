package api_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"
)

// TestForgedCursorsAreBadCursor checks that a cursor of the server's own
// format whose id holds a NUL, invalid UTF-8 or a control character is 400
// bad_cursor on every route that takes a cursor, on both stores (PostgreSQL
// refused such an id as text: a 500).
func TestForgedCursorsAreBadCursor(t *testing.T) {
	bothStores(t, func(t *testing.T, s *server) {
		tok := s.token("alice")
		w := s.createWebhook(tok, map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}})
		routes := []string{"/api/v1/chats", "/api/v1/files", "/api/v1/webhooks/" + w.ID + "/deliveries"}
		for _, id := range []string{"x\x00y", "x\xff\xfe", "x\x1b"} {
			cursor := url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte("c1:1700000000000000:" + id)))
			for _, route := range routes {
				s.do("GET", route+"?cursor="+cursor, tok, nil).expectError(t, http.StatusBadRequest, "bad_cursor")
			}
		}
	}, allowPrivate)
}
