package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/parleyhq/parley/internal/service"
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

// webhookInputErr answers a refused URL, event list or description (as
// the service refuses them), and the service's other webhook errors.
func webhookInputErr(err error) error {
	var (
		ue  *webhook.URLError
		ee  *webhook.EventsError
		de  *webhook.DescriptionError
		tm  *service.TooManyWebhooksError
		dis *service.WebhookDisabledError
	)
	switch {
	case errors.As(err, &ue):
		return &apiError{Status: http.StatusBadRequest, Code: ue.Code, Message: ue.Message,
			Details: map[string]any{"field": "url"}}
	case errors.As(err, &ee):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_events", Message: ee.Error(),
			Details: map[string]any{"field": "events", "known": store.EventTypes}}
	case errors.As(err, &de):
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field", Message: de.Error(),
			Details: map[string]any{"field": "description", "limit": webhook.MaxDescriptionBytes}}
	case errors.As(err, &tm):
		return &apiError{Status: http.StatusConflict, Code: "too_many_webhooks", Message: tm.Error(),
			Details: map[string]any{"limit": tm.Limit}}
	case errors.As(err, &dis):
		return &apiError{Status: http.StatusConflict, Code: "webhook_disabled", Message: dis.Error(),
			Details: map[string]any{"disabled_reason": dis.Reason}}
	}
	return err
}

// webhookInput is an endpoint's fields in a request body.
type webhookInput struct {
	URL         *string  `json:"url"`
	Events      []string `json:"events"`
	Description *string  `json:"description"`
	Disabled    *bool    `json:"disabled"`
}

func (in webhookInput) toService() service.WebhookInput {
	return service.WebhookInput{URL: in.URL, Events: in.Events, Description: in.Description, Disabled: in.Disabled}
}

func (a *api) createWebhook(w http.ResponseWriter, r *http.Request, owner string) error {
	var in struct {
		URL         *string  `json:"url"`
		Events      []string `json:"events"`
		Description *string  `json:"description"`
	}
	if err := a.decode(w, r, &in); err != nil {
		return err
	}
	e, err := a.svc.CreateWebhook(r.Context(), owner, service.WebhookInput{URL: in.URL, Events: in.Events, Description: in.Description})
	if err != nil {
		return webhookInputErr(err)
	}
	writeJSON(w, http.StatusCreated, webhookWithSecret{webhookJSON: toWebhookJSON(e), Secret: e.Secret})
	return nil
}

func (a *api) listWebhooks(w http.ResponseWriter, r *http.Request, owner string) error {
	list, err := a.svc.ListWebhooks(r.Context(), owner)
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
	e, err := a.svc.GetWebhook(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return webhookErr(err, "webhook")
	}
	writeJSON(w, http.StatusOK, toWebhookJSON(e))
	return nil
}

func (a *api) patchWebhook(w http.ResponseWriter, r *http.Request, owner string) error {
	var in webhookInput
	if err := a.decode(w, r, &in); err != nil {
		return err
	}
	e, err := a.svc.UpdateWebhook(r.Context(), owner, r.PathValue("id"), in.toService())
	if err != nil {
		return webhookErr(webhookInputErr(err), "webhook")
	}
	writeJSON(w, http.StatusOK, toWebhookJSON(e))
	return nil
}

func (a *api) deleteWebhook(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := a.svc.DeleteWebhook(r.Context(), owner, r.PathValue("id")); err != nil {
		return webhookErr(err, "webhook")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *api) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, owner string) error {
	e, err := a.svc.RotateWebhookSecret(r.Context(), owner, r.PathValue("id"))
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
	page, err := a.svc.ListDeliveries(r.Context(), owner, r.PathValue("id"), q.Get("cursor"), limit)
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
	d, err := a.svc.Redeliver(r.Context(), owner, r.PathValue("id"), id)
	if err != nil {
		return webhookErr(webhookInputErr(err), "delivery")
	}
	writeJSON(w, http.StatusAccepted, toDeliveryJSON(d))
	return nil
}

// redeliverFailed serves POST /webhooks/{id}/redeliver-failed, body
// {"since": "<RFC 3339 time>"}: every event whose last delivery to the
// endpoint failed and was made at or after since is queued again, in
// event order; the answer counts them.
func (a *api) redeliverFailed(w http.ResponseWriter, r *http.Request, owner string) error {
	var in struct {
		Since *time.Time `json:"since"`
	}
	if err := a.decode(w, r, &in); err != nil {
		return err
	}
	if in.Since == nil {
		return &apiError{Status: http.StatusBadRequest, Code: "invalid_field",
			Message: `since is required: the time (RFC 3339, like "2026-12-06T00:00:00Z") from which failed deliveries are sent again`,
			Details: map[string]any{"field": "since"}}
	}
	n, err := a.svc.RedeliverFailed(r.Context(), owner, r.PathValue("id"), *in.Since)
	if err != nil {
		return webhookErr(webhookInputErr(err), "webhook")
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"redelivered": n})
	return nil
}
