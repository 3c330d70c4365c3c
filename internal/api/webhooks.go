package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/netguard"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/webhook"
)

// The webhook routes: an owner's endpoints and their deliveries. Another
// owner's endpoint or delivery is a 404, as if it did not exist. The
// signing secret is shown only in the answers of creation and rotation.

// webhookJSON is the endpoint object.
type webhookJSON struct {
	ID             string    `json:"id"`
	URL            string    `json:"url"`
	Events         []string  `json:"events"`
	Description    string    `json:"description"`
	Disabled       bool      `json:"disabled"`
	DisabledReason string    `json:"disabled_reason"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// webhookWithSecret is the answer of creation and rotation.
type webhookWithSecret struct {
	webhookJSON
	Secret                  string     `json:"secret"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
}

func toWebhookJSON(e store.WebhookEndpoint) webhookJSON {
	return webhookJSON{ID: e.ID, URL: e.URL, Events: e.Events, Description: e.Description, Disabled: e.Disabled,
		DisabledReason: e.DisabledReason, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
}

// deliveryJSON is the delivery object. last_status_code is null while no
// attempt got an HTTP answer; next_attempt_at is null once the delivery
// is delivered or failed.
type deliveryJSON struct {
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

func toDeliveryJSON(d store.WebhookDelivery) deliveryJSON {
	out := deliveryJSON{ID: strconv.FormatInt(d.ID, 10), EventID: d.EventID, EventType: d.EventType, ChatID: d.ChatID,
		Status: d.Status, Attempts: d.Attempts, LastError: d.LastError, NextAttemptAt: d.NextAttemptAt,
		CreatedAt: d.CreatedAt, DeliveredAt: d.DeliveredAt}
	if d.LastStatusCode != 0 {
		out.LastStatusCode = &d.LastStatusCode
	}
	return out
}

// errWebhookNotFound answers for a missing endpoint or delivery (or
// another owner's).
func errWebhookNotFound(what string) error {
	return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: what + " not found"}
}

// webhookErr maps the store's not-found to the webhook routes' 404.
func webhookErr(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return errWebhookNotFound(what)
	}
	return err
}

// checkWebhook answers a refused URL, event list or description.
func (a *api) checkWebhook(r *http.Request, url *string, events []string, description *string) error {
	if url != nil {
		policy := netguard.NewPolicy(a.cfg.Webhooks.AllowPrivate, nil)
		if err := webhook.CheckURL(r.Context(), policy, net.DefaultResolver, *url); err != nil {
			var ue *webhook.URLError
			if errors.As(err, &ue) {
				return &apiError{Status: http.StatusBadRequest, Code: ue.Code, Message: ue.Message,
					Details: map[string]any{"field": "url"}}
			}
			return err
		}
	}
	if events != nil {
		if err := webhook.CheckEvents(events); err != nil {
			return &apiError{Status: http.StatusBadRequest, Code: "invalid_events", Message: err.Error(),
				Details: map[string]any{"field": "events", "known": store.EventTypes}}
		}
	}
	if description != nil && len(*description) > webhook.MaxDescriptionBytes {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
			Message: fmt.Sprintf("description is %d bytes long; at most %d", len(*description), webhook.MaxDescriptionBytes),
			Details: map[string]any{"field": "description", "limit": webhook.MaxDescriptionBytes}}
	}
	return nil
}

func (a *api) createWebhook(w http.ResponseWriter, r *http.Request, owner string) error {
	var in struct {
		URL         *string  `json:"url"`
		Events      []string `json:"events"`
		Description string   `json:"description"`
	}
	if err := a.decode(w, r, &in); err != nil {
		return err
	}
	if in.URL == nil {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_url", Message: "url is required",
			Details: map[string]any{"field": "url"}}
	}
	if in.Events == nil {
		in.Events = []string{}
	}
	if err := a.checkWebhook(r, in.URL, in.Events, &in.Description); err != nil {
		return err
	}
	existing, err := a.st.ListWebhooks(r.Context(), owner)
	if err != nil {
		return err
	}
	if len(existing) >= webhook.MaxEndpoints {
		return &apiError{Status: http.StatusConflict, Code: "too_many_webhooks",
			Message: fmt.Sprintf("an owner may have at most %d webhook endpoints; delete one first", webhook.MaxEndpoints),
			Details: map[string]any{"limit": webhook.MaxEndpoints}}
	}
	e := store.WebhookEndpoint{ID: webhook.NewEndpointID(), Owner: owner, URL: *in.URL, Events: in.Events,
		Description: in.Description, Secret: webhook.NewSecret()}
	if err := a.st.CreateWebhook(r.Context(), &e); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, webhookWithSecret{webhookJSON: toWebhookJSON(e), Secret: e.Secret})
	return nil
}

func (a *api) listWebhooks(w http.ResponseWriter, r *http.Request, owner string) error {
	list, err := a.st.ListWebhooks(r.Context(), owner)
	if err != nil {
		return err
	}
	out := make([]webhookJSON, len(list))
	for i, e := range list {
		out[i] = toWebhookJSON(e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": out})
	return nil
}

func (a *api) getWebhook(w http.ResponseWriter, r *http.Request, owner string) error {
	e, err := a.st.GetWebhook(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return webhookErr(err, "webhook")
	}
	writeJSON(w, http.StatusOK, toWebhookJSON(e))
	return nil
}

func (a *api) patchWebhook(w http.ResponseWriter, r *http.Request, owner string) error {
	var in struct {
		URL         *string  `json:"url"`
		Events      []string `json:"events"`
		Description *string  `json:"description"`
		Disabled    *bool    `json:"disabled"`
	}
	if err := a.decode(w, r, &in); err != nil {
		return err
	}
	if err := a.checkWebhook(r, in.URL, in.Events, in.Description); err != nil {
		return err
	}
	e, err := a.st.UpdateWebhook(r.Context(), owner, r.PathValue("id"),
		store.WebhookPatch{URL: in.URL, Events: in.Events, Description: in.Description, Disabled: in.Disabled})
	if err != nil {
		return webhookErr(err, "webhook")
	}
	writeJSON(w, http.StatusOK, toWebhookJSON(e))
	return nil
}

func (a *api) deleteWebhook(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := a.st.DeleteWebhook(r.Context(), owner, r.PathValue("id")); err != nil {
		return webhookErr(err, "webhook")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, owner string) error {
	e, err := a.st.RotateWebhookSecret(r.Context(), owner, r.PathValue("id"), webhook.NewSecret(), webhook.SecretOverlap)
	if err != nil {
		return webhookErr(err, "webhook")
	}
	writeJSON(w, http.StatusOK, webhookWithSecret{webhookJSON: toWebhookJSON(e), Secret: e.Secret,
		PreviousSecretExpiresAt: e.PreviousSecretUntil})
	return nil
}

func (a *api) listDeliveries(w http.ResponseWriter, r *http.Request, owner string) error {
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"), defaultChatPage)
	if err != nil {
		return err
	}
	page, err := a.st.ListDeliveries(r.Context(), owner, r.PathValue("id"), q.Get("cursor"), limit)
	if err != nil {
		return webhookErr(err, "webhook")
	}
	out := make([]deliveryJSON, len(page.Deliveries))
	for i, d := range page.Deliveries {
		out[i] = toDeliveryJSON(d)
	}
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": out, "next_cursor": page.NextCursor})
	return nil
}

func (a *api) redeliver(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := strconv.ParseInt(r.PathValue("delivery_id"), 10, 64)
	if err != nil || id < 1 {
		return errWebhookNotFound("delivery")
	}
	e, err := a.st.GetWebhook(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return webhookErr(err, "webhook")
	}
	if e.Disabled {
		return &apiError{Status: http.StatusConflict, Code: "webhook_disabled",
			Message: "the webhook is disabled (" + e.DisabledReason + "); enable it with PATCH {\"disabled\": false} first",
			Details: map[string]any{"disabled_reason": e.DisabledReason}}
	}
	d, err := a.st.Redeliver(r.Context(), owner, e.ID, id)
	if err != nil {
		return webhookErr(err, "delivery")
	}
	a.wakeDeliverers(r)
	writeJSON(w, http.StatusAccepted, toDeliveryJSON(d))
	return nil
}

// wakeDeliverers tells the deliverers of every replica that a delivery is
// due; a lost wake-up costs a poll interval.
func (a *api) wakeDeliverers(r *http.Request) {
	if err := a.ps.Publish(r.Context(), events.WebhookTopic, nil); err != nil {
		a.log.Warn("webhook deliverers not woken; they poll", "err", err)
	}
}
