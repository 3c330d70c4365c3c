package facade_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodyAndMessageLimits: a /v1 body is held to limits.max_body_bytes, as
// in parley's own API (413 body_too_large), and a user message over
// limits.max_message_bytes is a 400 naming that message; nothing is stored.
func TestBodyAndMessageLimits(t *testing.T) {
	r, _ := newSQLite(t)
	r.cfg.Limits.MaxBodyBytes = 4096
	r.cfg.Limits.MaxMessageBytes = 100
	tok := r.token("alice")
	long := strings.Repeat("x", 200)
	cases := []struct {
		name, path, body string
		status           int
		param, code      any
	}{
		{"body", "/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"` + strings.Repeat("y", 5000) + `"}]}`,
			http.StatusRequestEntityTooLarge, nil, "body_too_large"},
		{"responses body", "/responses", `{"model":"fake","input":"` + strings.Repeat("y", 5000) + `"}`,
			http.StatusRequestEntityTooLarge, nil, "body_too_large"},
		{"message", "/chat/completions", `{"model":"fake","messages":[{"role":"system","content":"brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"` + long + `"}]}`,
			http.StatusBadRequest, "messages[3].content", nil},
		{"message in parts", "/chat/completions", `{"model":"fake","messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"}]}]}`,
			http.StatusBadRequest, "messages[0].content", nil},
		{"input item", "/responses", `{"model":"fake","input":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"` + long + `"}]}`,
			http.StatusBadRequest, "input[2].content", nil},
	}
	for _, tc := range cases {
		status, out := r.post(tok, tc.path, tc.body)
		e, _ := out["error"].(map[string]any)
		if status != tc.status || e == nil || e["type"] != "invalid_request_error" || e["param"] != tc.param || e["code"] != tc.code {
			t.Errorf("%s: %d %v, want %d param %v code %v", tc.name, status, out, tc.status, tc.param, tc.code)
		}
		if msg, _ := e["message"].(string); tc.status == http.StatusBadRequest && !strings.Contains(msg, "is 200 bytes, at most 100 allowed") {
			t.Errorf("%s: message %q", tc.name, msg)
		}
	}
	if cs := r.chats("alice"); len(cs) != 0 {
		t.Errorf("%d chats stored", len(cs))
	}
}
