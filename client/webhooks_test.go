package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/api"
	"github.com/parleyhq/parley/internal/auth"
	"github.com/parleyhq/parley/internal/config"
	"github.com/parleyhq/parley/internal/pubsub/memory"
	"github.com/parleyhq/parley/internal/testutil/sqlitetest"
)

// webhookServer is a parley API without an engine or a deliverer, which
// lets private endpoints be created: events wait in the outbox, pending.
// It returns clients of alice and bob.
func webhookServer(t *testing.T) (alice, bob *client.Client) { return webhookServerWith(t, true) }

// webhookServerWith is webhookServer with webhooks.allow_private set as
// given.
func webhookServerWith(t *testing.T, allowPrivate bool) (alice, bob *client.Client) {
	t.Helper()
	ctx := context.Background()
	st := sqlitetest.Open(t, t.TempDir())
	cfg := config.Default()
	cfg.Models = []config.Model{{Name: "echo", Provider: "echo", Model: "echo"}}
	cfg.DefaultModel = "echo"
	cfg.Webhooks.AllowPrivate = allowPrivate
	ps := memory.New()
	h, err := api.New(api.Deps{Config: &cfg, Store: st, PubSub: ps})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { ps.Close(); srv.Close() })
	var cs []*client.Client
	for _, owner := range []string{"alice", "bob"} {
		tok, _, err := auth.Issue(ctx, st, owner, "test")
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, client.New(srv.URL, tok))
	}
	return cs[0], cs[1]
}

func TestWebhookEndpoints(t *testing.T) {
	t.Parallel()
	alice, bob := webhookServer(t)
	ctx := testCtx(t)

	w, err := alice.CreateWebhook(ctx, client.CreateWebhookRequest{URL: "http://127.0.0.1:9/hook",
		Events: []string{client.EventChatCompleted, client.EventChatFailed}, Description: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if w.ID == "" || !strings.HasPrefix(w.Secret, "whsec_") || w.URL != "http://127.0.0.1:9/hook" ||
		!slices.Equal(w.Events, []string{client.EventChatCompleted, client.EventChatFailed}) || w.Description != "ci" ||
		w.Disabled || w.CreatedAt.IsZero() {
		t.Fatalf("CreateWebhook: %+v", w)
	}
	if _, err := standardwebhooks.NewWebhook(w.Secret); err != nil {
		t.Fatalf("the secret %q is not one the Standard Webhooks library reads: %v", w.Secret, err)
	}
	_, err = alice.CreateWebhook(ctx, client.CreateWebhookRequest{URL: "http://127.0.0.1:9/", Events: []string{"chat.exploded"}})
	apiError(t, err, http.StatusBadRequest, "invalid_events")
	_, err = alice.CreateWebhook(ctx, client.CreateWebhookRequest{URL: "ftp://127.0.0.1/", Events: []string{client.EventAll}})
	apiError(t, err, http.StatusBadRequest, "invalid_url")

	strict, _ := webhookServerWith(t, false)
	_, err = strict.CreateWebhook(ctx, client.CreateWebhookRequest{URL: "http://127.0.0.1:9/hook", Events: []string{client.EventAll}})
	apiError(t, err, http.StatusBadRequest, "url_not_allowed")

	got, err := alice.GetWebhook(ctx, w.ID)
	if err != nil || got.ID != w.ID || got.URL != w.URL {
		t.Fatalf("GetWebhook: %+v, %v", got, err)
	}
	list, err := alice.ListWebhooks(ctx)
	if err != nil || len(list) != 1 || list[0].ID != w.ID {
		t.Fatalf("ListWebhooks: %+v, %v", list, err)
	}
	// Another owner's endpoint is not found, on every route.
	_, err = bob.GetWebhook(ctx, w.ID)
	apiError(t, err, http.StatusNotFound, "not_found")
	_, err = bob.UpdateWebhook(ctx, w.ID, client.UpdateWebhookRequest{Disabled: ptr(true)})
	apiError(t, err, http.StatusNotFound, "not_found")
	_, err = bob.RotateWebhookSecret(ctx, w.ID)
	apiError(t, err, http.StatusNotFound, "not_found")
	_, err = bob.ListWebhookDeliveries(ctx, w.ID, 0, "")
	apiError(t, err, http.StatusNotFound, "not_found")
	apiError(t, bob.DeleteWebhook(ctx, w.ID), http.StatusNotFound, "not_found")
	if l, err := bob.ListWebhooks(ctx); err != nil || len(l) != 0 {
		t.Fatalf("bob's ListWebhooks: %+v, %v", l, err)
	}

	up, err := alice.UpdateWebhook(ctx, w.ID, client.UpdateWebhookRequest{Disabled: ptr(true), Events: &[]string{client.EventAll}})
	if err != nil || !up.Disabled || up.DisabledReason == "" || !slices.Equal(up.Events, []string{client.EventAll}) || up.URL != w.URL {
		t.Fatalf("UpdateWebhook: %+v, %v", up, err)
	}
	if up, err = alice.UpdateWebhook(ctx, w.ID, client.UpdateWebhookRequest{Disabled: ptr(false)}); err != nil || up.Disabled || up.DisabledReason != "" {
		t.Fatalf("UpdateWebhook enable: %+v, %v", up, err)
	}

	rot, err := alice.RotateWebhookSecret(ctx, w.ID)
	if err != nil || !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == w.Secret ||
		rot.PreviousSecretExpiresAt.Sub(time.Now()) < 23*time.Hour {
		t.Fatalf("RotateWebhookSecret: %+v, %v; want a new secret, the old one signing for 24 h", rot, err)
	}

	if err := alice.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	_, err = alice.GetWebhook(ctx, w.ID)
	apiError(t, err, http.StatusNotFound, "not_found")
}

func TestWebhookDeliveriesAndRedeliver(t *testing.T) {
	t.Parallel()
	alice, bob := webhookServer(t)
	ctx := testCtx(t)
	w, err := alice.CreateWebhook(ctx, client.CreateWebhookRequest{URL: "http://127.0.0.1:9/hook", Events: []string{client.EventChatTitleChanged}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := alice.CreateChat(ctx, client.CreateChatRequest{Title: "one"})
	if err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"two", "three", "four"} {
		if _, err := alice.UpdateChat(ctx, c.ID, client.ChatPatch{Title: &title}); err != nil {
			t.Fatal(err)
		}
	}
	// Two pages, newest first; nothing delivers here, so all are pending.
	p1, err := alice.ListWebhookDeliveries(ctx, w.ID, 2, "")
	if err != nil || len(p1.Deliveries) != 2 || p1.NextCursor == "" {
		t.Fatalf("first page: %+v, %v", p1, err)
	}
	p2, err := alice.ListWebhookDeliveries(ctx, w.ID, 2, p1.NextCursor)
	if err != nil || len(p2.Deliveries) != 1 || p2.NextCursor != "" {
		t.Fatalf("second page: %+v, %v", p2, err)
	}
	all := append(p1.Deliveries, p2.Deliveries...)
	for i, d := range all {
		if d.EventType != client.EventChatTitleChanged || d.ChatID != c.ID || d.Status != client.DeliveryPending ||
			d.Attempts != 0 || d.EventID == "" || d.CreatedAt.IsZero() {
			t.Errorf("delivery %d: %+v", i, d)
		}
		if i > 0 && d.CreatedAt.After(all[i-1].CreatedAt) {
			t.Errorf("delivery %d is newer than the one before it: not newest first", i)
		}
	}

	oldest := all[2]
	re, err := alice.Redeliver(ctx, w.ID, oldest.ID)
	if err != nil || re.EventID != oldest.EventID || re.Status != client.DeliveryPending || re.ID == oldest.ID {
		t.Fatalf("Redeliver: %+v, %v; want a new pending delivery of event %s", re, err, oldest.EventID)
	}
	if p, err := alice.ListWebhookDeliveries(ctx, w.ID, 0, ""); err != nil || len(p.Deliveries) != 4 || p.Deliveries[0].ID != re.ID {
		t.Fatalf("after the redelivery: %+v, %v; want it first of 4", p, err)
	}
	_, err = bob.Redeliver(ctx, w.ID, oldest.ID)
	apiError(t, err, http.StatusNotFound, "not_found")
	_, err = alice.Redeliver(ctx, w.ID, "999999")
	apiError(t, err, http.StatusNotFound, "not_found")
	_, err = alice.ListWebhookDeliveries(ctx, w.ID, 0, "not-a-cursor")
	apiError(t, err, http.StatusBadRequest, "bad_cursor")
	// Nothing failed: nothing to redeliver; another owner's endpoint is 404.
	if n, err := alice.RedeliverFailed(ctx, w.ID, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("RedeliverFailed = %d, %v; want 0", n, err)
	}
	_, err = bob.RedeliverFailed(ctx, w.ID, time.Now())
	apiError(t, err, http.StatusNotFound, "not_found")
}

// TestVerifyWebhook checks VerifyWebhook against requests signed by the
// Standard Webhooks library: a good one is decoded; a changed body, another
// secret and an old timestamp are refused.
func TestVerifyWebhook(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"type":"chat.completed","timestamp":"2026-12-05T10:00:00Z","data":{"id":"c1","owner":"alice","title":"t","status":"waiting","labels":{"k":"v"},"required_action":null,"last_error":null,"usage":{"input_tokens":3,"output_tokens":4,"cost_micros":0}}}`)
	signed := func(secret string, at time.Time, body []byte) http.Header {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_1", at, body)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("webhook-id", "msg_1")
		h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		h.Set("webhook-signature", sig)
		return h
	}
	now := time.Now()
	ev, err := client.VerifyWebhook(secret, body, signed(secret, now, body))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != client.EventChatCompleted || ev.Data.ID != "c1" || ev.Data.Owner != "alice" || ev.Data.Status != client.StatusWaiting ||
		ev.Data.Labels["k"] != "v" || ev.Data.Usage.OutputTokens != 4 || !ev.Timestamp.Equal(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("VerifyWebhook: %+v", ev)
	}
	changed := append([]byte(nil), body...)
	changed[len(changed)-3] = '5'
	for name, c := range map[string]struct {
		secret string
		body   []byte
		h      http.Header
	}{
		"changed body":  {secret, changed, signed(secret, now, body)},
		"other secret":  {"whsec_" + "c2VjcmV0LW9mLWFub3RoZXItZW5kcG9pbnQ=", body, signed(secret, now, body)},
		"old timestamp": {secret, body, signed(secret, now.Add(-10*time.Minute), body)},
		"no headers":    {secret, body, http.Header{}},
	} {
		if _, err := client.VerifyWebhook(c.secret, c.body, c.h); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	if _, err := client.VerifyWebhook("whsec_!!", body, signed(secret, now, body)); err == nil || !strings.Contains(err.Error(), "webhook secret") {
		t.Errorf("a secret that is not base64: %v", err)
	}
}
