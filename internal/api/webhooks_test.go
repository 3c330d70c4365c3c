package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/store"
)

// webhookBody is the endpoint object, with the secret where it is shown.
type webhookBody struct {
	ID                      string     `json:"id"`
	URL                     string     `json:"url"`
	Events                  []string   `json:"events"`
	Description             string     `json:"description"`
	Disabled                bool       `json:"disabled"`
	DisabledReason          string     `json:"disabled_reason"`
	CreatedAt               time.Time  `json:"created_at"`
	UpdatedAt               time.Time  `json:"updated_at"`
	Secret                  *string    `json:"secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

type deliveryBody struct {
	ID             string     `json:"id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	ChatID         string     `json:"chat_id"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      string     `json:"last_error"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	CreatedAt      time.Time  `json:"created_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
}

func allowPrivate(s *setup) {
	cfg := *s.cfg
	cfg.Webhooks.AllowPrivate = true
	s.cfg = &cfg
}

func (s *server) createWebhook(token string, body map[string]any) webhookBody {
	s.t.Helper()
	var w webhookBody
	s.do("POST", "/api/v1/webhooks", token, body).expect(s.t, http.StatusCreated, &w)
	return w
}

func TestWebhookRoutes(t *testing.T) {
	s := newSQLite(t, allowPrivate)
	tok := s.token("alice")
	w := s.createWebhook(tok, map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}, "description": "ci"})
	if !strings.HasPrefix(w.ID, "wh_") || w.Secret == nil || !strings.HasPrefix(*w.Secret, "whsec_") ||
		len(*w.Secret) != len("whsec_")+44 || w.Disabled || w.Description != "ci" || w.CreatedAt.IsZero() {
		t.Fatalf("created %+v", w)
	}
	var got webhookBody
	s.do("GET", "/api/v1/webhooks/"+w.ID, tok, nil).expect(t, http.StatusOK, &got)
	if got.Secret != nil || got.ID != w.ID || got.URL != w.URL {
		t.Fatalf("GET shows %+v (the secret only at creation)", got)
	}
	var list struct {
		Webhooks []webhookBody `json:"webhooks"`
	}
	s.do("GET", "/api/v1/webhooks", tok, nil).expect(t, http.StatusOK, &list)
	if len(list.Webhooks) != 1 || list.Webhooks[0].ID != w.ID || list.Webhooks[0].Secret != nil {
		t.Fatalf("list = %+v", list)
	}

	// PATCH: disabled true, then false again.
	s.do("PATCH", "/api/v1/webhooks/"+w.ID, tok, map[string]any{"disabled": true, "events": []string{"chat.failed"}}).
		expect(t, http.StatusOK, &got)
	if !got.Disabled || got.DisabledReason == "" || len(got.Events) != 1 || got.Events[0] != "chat.failed" {
		t.Fatalf("patched %+v", got)
	}
	s.do("PATCH", "/api/v1/webhooks/"+w.ID, tok, map[string]any{"disabled": false, "events": []string{"*"}}).
		expect(t, http.StatusOK, &got)
	if got.Disabled || got.DisabledReason != "" || got.Events[0] != "*" {
		t.Fatalf("re-enabled %+v", got)
	}

	// Rotation: a new secret, the old one signing for 24 h more.
	var rot webhookBody
	s.do("POST", "/api/v1/webhooks/"+w.ID+"/rotate-secret", tok, nil).expect(t, http.StatusOK, &rot)
	if rot.Secret == nil || *rot.Secret == *w.Secret || rot.PreviousSecretExpiresAt == nil ||
		rot.PreviousSecretExpiresAt.Before(time.Now().Add(23*time.Hour)) {
		t.Fatalf("rotated %+v", rot)
	}

	// A chat's creation and its change make deliveries, listed newest first.
	c := s.createChat(tok, map[string]any{})
	s.force(c.ID, nil, store.Transition{From: "waiting", To: "pending"})
	var page struct {
		Deliveries []deliveryBody `json:"deliveries"`
		NextCursor *string        `json:"next_cursor"`
	}
	s.do("GET", "/api/v1/webhooks/"+w.ID+"/deliveries?limit=10", tok, nil).expect(t, http.StatusOK, &page)
	if len(page.Deliveries) != 2 || page.NextCursor == nil || *page.NextCursor != "" ||
		page.Deliveries[1].EventType != "chat.created" || page.Deliveries[1].ChatID != c.ID {
		t.Fatalf("deliveries = %+v", page)
	}
	d := page.Deliveries[0]
	if d.EventType != "chat.status_changed" || d.ChatID != c.ID || d.Status != "pending" || d.LastStatusCode != nil ||
		d.NextAttemptAt == nil || !strings.HasPrefix(d.EventID, "msg_") || d.ID == "" {
		t.Fatalf("delivery = %+v", d)
	}
	var re deliveryBody
	s.do("POST", "/api/v1/webhooks/"+w.ID+"/deliveries/"+d.ID+"/redeliver", tok, nil).expect(t, http.StatusAccepted, &re)
	if re.ID == d.ID || re.EventID != d.EventID || re.Status != "pending" {
		t.Fatalf("redelivery = %+v of %+v", re, d)
	}
	s.do("POST", "/api/v1/webhooks/"+w.ID+"/deliveries/999999/redeliver", tok, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("POST", "/api/v1/webhooks/"+w.ID+"/deliveries/x/redeliver", tok, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("GET", "/api/v1/webhooks/"+w.ID+"/deliveries?cursor=zz", tok, nil).expectError(t, http.StatusBadRequest, "bad_cursor")
	s.do("GET", "/api/v1/webhooks/"+w.ID+"/deliveries?limit=0", tok, nil).expectError(t, http.StatusBadRequest, "invalid_query")

	// A disabled endpoint is not redelivered to.
	s.do("PATCH", "/api/v1/webhooks/"+w.ID, tok, map[string]any{"disabled": true}).expect(t, http.StatusOK, nil)
	s.do("POST", "/api/v1/webhooks/"+w.ID+"/deliveries/"+d.ID+"/redeliver", tok, nil).
		expectError(t, http.StatusConflict, "webhook_disabled")

	s.do("DELETE", "/api/v1/webhooks/"+w.ID, tok, nil).expect(t, http.StatusNoContent, nil)
	s.do("GET", "/api/v1/webhooks/"+w.ID, tok, nil).expectError(t, http.StatusNotFound, "not_found")
	s.do("DELETE", "/api/v1/webhooks/"+w.ID, tok, nil).expectError(t, http.StatusNotFound, "not_found")
}

func TestWebhookBadInput(t *testing.T) {
	s := newSQLite(t) // webhooks.allow_private off
	tok := s.token("alice")
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"no url", map[string]any{"events": []string{"*"}}, 400, "invalid_url"},
		{"ftp", map[string]any{"url": "ftp://example.com/x", "events": []string{"*"}}, 400, "invalid_url"},
		{"relative", map[string]any{"url": "/hook", "events": []string{"*"}}, 400, "invalid_url"},
		{"fragment", map[string]any{"url": "https://example.com/x#y", "events": []string{"*"}}, 400, "invalid_url"},
		{"too long", map[string]any{"url": "https://example.com/" + strings.Repeat("a", 3000), "events": []string{"*"}}, 400, "invalid_url"},
		{"loopback", map[string]any{"url": "http://127.0.0.1:8080/x", "events": []string{"*"}}, 400, "url_not_allowed"},
		{"localhost", map[string]any{"url": "http://localhost/x", "events": []string{"*"}}, 400, "url_not_allowed"},
		{"private", map[string]any{"url": "https://10.1.2.3/x", "events": []string{"*"}}, 400, "url_not_allowed"},
		{"link-local", map[string]any{"url": "http://169.254.169.254/latest", "events": []string{"*"}}, 400, "url_not_allowed"},
		{"ipv6 loopback", map[string]any{"url": "http://[::1]:80/x", "events": []string{"*"}}, 400, "url_not_allowed"},
		{"no events", map[string]any{"url": "https://8.8.8.8/x"}, 400, "invalid_events"},
		{"empty events", map[string]any{"url": "https://8.8.8.8/x", "events": []string{}}, 400, "invalid_events"},
		{"unknown event", map[string]any{"url": "https://8.8.8.8/x", "events": []string{"chat.exploded"}}, 400, "invalid_events"},
		{"twice", map[string]any{"url": "https://8.8.8.8/x", "events": []string{"chat.failed", "chat.failed"}}, 400, "invalid_events"},
		{"long description", map[string]any{"url": "https://8.8.8.8/x", "events": []string{"*"}, "description": strings.Repeat("d", 2000)}, 400, "invalid_field"},
		{"unknown field", map[string]any{"url": "https://8.8.8.8/x", "events": []string{"*"}, "secret": "mine"}, 400, "invalid_field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := s.do("POST", "/api/v1/webhooks", tok, tc.body).expectError(t, tc.status, tc.code)
			if tc.code == "url_not_allowed" && !strings.Contains(e.Error.Message, "allow_private") {
				t.Fatalf("message %q does not say how to allow it", e.Error.Message)
			}
		})
	}
	var list struct {
		Webhooks []webhookBody `json:"webhooks"`
	}
	s.do("GET", "/api/v1/webhooks", tok, nil).expect(t, http.StatusOK, &list)
	if len(list.Webhooks) != 0 {
		t.Fatalf("refused requests created %d endpoints", len(list.Webhooks))
	}
	// A public address passes; PATCH checks the same way.
	w := s.createWebhook(tok, map[string]any{"url": "https://8.8.8.8/hook", "events": []string{"chat.completed", "chat.failed"}})
	s.do("PATCH", "/api/v1/webhooks/"+w.ID, tok, map[string]any{"url": "http://127.0.0.1/x"}).expectError(t, 400, "url_not_allowed")
	s.do("PATCH", "/api/v1/webhooks/"+w.ID, tok, map[string]any{"events": []string{}}).expectError(t, 400, "invalid_events")
	var got webhookBody
	s.do("GET", "/api/v1/webhooks/"+w.ID, tok, nil).expect(t, http.StatusOK, &got)
	if got.URL != "https://8.8.8.8/hook" || len(got.Events) != 2 {
		t.Fatalf("a refused PATCH changed the endpoint: %+v", got)
	}
}

// TestWebhookOwnerIsolation: every route answers 404 for another owner's
// endpoint and delivery, and changes nothing.
func TestWebhookOwnerIsolation(t *testing.T) {
	s := newSQLite(t, allowPrivate)
	tokA, tokB := s.token("alice"), s.token("bob")
	w := s.createWebhook(tokA, map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}})
	c := s.createChat(tokA, map[string]any{})
	s.force(c.ID, nil, store.Transition{From: "waiting", To: "pending"})
	var page struct {
		Deliveries []deliveryBody `json:"deliveries"`
	}
	s.do("GET", "/api/v1/webhooks/"+w.ID+"/deliveries", tokA, nil).expect(t, http.StatusOK, &page)
	if len(page.Deliveries) != 2 { // chat.created, chat.status_changed
		t.Fatalf("deliveries = %+v", page)
	}
	p := "/api/v1/webhooks/" + w.ID
	for _, rq := range []struct {
		method, path string
		body         any
	}{
		{"GET", p, nil},
		{"PATCH", p, map[string]any{"disabled": true}},
		{"PATCH", p, map[string]any{"url": "http://127.0.0.1:10/mine"}},
		{"DELETE", p, nil},
		{"POST", p + "/rotate-secret", nil},
		{"GET", p + "/deliveries", nil},
		{"POST", p + "/deliveries/" + page.Deliveries[0].ID + "/redeliver", nil},
	} {
		e := s.do(rq.method, rq.path, tokB, rq.body).expectError(t, http.StatusNotFound, "not_found")
		if !strings.Contains(e.Error.Message, "not found") {
			t.Fatalf("%s %s: %q", rq.method, rq.path, e.Error.Message)
		}
	}
	var list struct {
		Webhooks []webhookBody `json:"webhooks"`
	}
	s.do("GET", "/api/v1/webhooks", tokB, nil).expect(t, http.StatusOK, &list)
	if len(list.Webhooks) != 0 {
		t.Fatalf("bob lists %+v", list.Webhooks)
	}
	var got webhookBody
	s.do("GET", p, tokA, nil).expect(t, http.StatusOK, &got)
	if got.Disabled || got.URL != w.URL || !got.UpdatedAt.Equal(w.UpdatedAt) {
		t.Fatalf("bob's requests changed alice's endpoint: %+v", got)
	}
	s.do("GET", p+"/deliveries", tokA, nil).expect(t, http.StatusOK, &page)
	if len(page.Deliveries) != 2 {
		t.Fatalf("bob's redelivery went through: %+v", page)
	}
	// Bob's endpoint sees none of alice's events.
	wb := s.createWebhook(tokB, map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"*"}})
	c2 := s.createChat(tokA, map[string]any{})
	s.force(c2.ID, nil, store.Transition{From: "waiting", To: "pending"})
	s.do("GET", "/api/v1/webhooks/"+wb.ID+"/deliveries", tokB, nil).expect(t, http.StatusOK, &page)
	if len(page.Deliveries) != 0 {
		t.Fatalf("bob's endpoint got alice's events: %+v", page)
	}
}
