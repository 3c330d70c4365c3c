package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Webhook event types (docs/webhooks.md says when each is sent).
const (
	EventChatCreated        = "chat.created"
	EventChatActionRequired = "chat.action_required"
	EventChatStatusChanged  = "chat.status_changed"
	EventChatCompleted      = "chat.completed"
	EventChatFailed         = "chat.failed"
	EventChatTitleChanged   = "chat.title_changed"
	EventAll                = "*" // every event type, present and future
)

// Webhook is an endpoint that receives its owner's chat events.
type Webhook struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
	Disabled    bool     `json:"disabled"`
	// DisabledReason says why the endpoint is disabled, in words: "disabled
	// by its owner", "the endpoint answered 410 Gone", "disabled after 10
	// failed deliveries in a row"; "" while it is enabled.
	DisabledReason string    `json:"disabled_reason"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// WebhookSecret is an endpoint with its signing secret ("whsec_…"), which
// the server shows only when it creates the endpoint or rotates the secret.
type WebhookSecret struct {
	Webhook
	Secret string `json:"secret"`
	// PreviousSecretExpiresAt is when the secret before a rotation stops
	// signing; zero when the endpoint was just created.
	PreviousSecretExpiresAt time.Time `json:"previous_secret_expires_at"`
}

// CreateWebhookRequest is the body of CreateWebhook.
type CreateWebhookRequest struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"` // event types, or []string{EventAll}
	Description string   `json:"description,omitempty"`
}

// UpdateWebhookRequest changes the fields that are not nil. Disabled false
// enables an endpoint the server disabled.
type UpdateWebhookRequest struct {
	URL         *string   `json:"url,omitempty"`
	Events      *[]string `json:"events,omitempty"`
	Description *string   `json:"description,omitempty"`
	Disabled    *bool     `json:"disabled,omitempty"`
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"   // not yet delivered; NextAttemptAt says when it is tried
	DeliveryDelivered = "delivered" // the endpoint answered 2xx
	DeliveryFailed    = "failed"    // the last attempt of the schedule failed
)

// Delivery is one event on its way to one endpoint, with its attempts.
type Delivery struct {
	ID             string     `json:"id"`
	EventID        string     `json:"event_id"` // the webhook-id header: receivers dedupe on it
	EventType      string     `json:"event_type"`
	ChatID         string     `json:"chat_id"`
	Status         string     `json:"status"` // DeliveryPending, DeliveryDelivered or DeliveryFailed
	Attempts       int        `json:"attempts"`
	LastStatusCode int        `json:"last_status_code"` // 0: no HTTP answer (yet)
	LastError      string     `json:"last_error"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"` // nil unless pending
	CreatedAt      time.Time  `json:"created_at"`
	DeliveredAt    *time.Time `json:"delivered_at"` // nil unless delivered
}

// DeliveryPage is one page of an endpoint's deliveries, newest first;
// NextCursor is "" on the last page.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	NextCursor string     `json:"next_cursor"`
}

// CreateWebhook creates an endpoint of the token's owner. The answer holds
// the signing secret, which is not shown again. Refusals are *APIError
// values: 400 "invalid_url" (not an http or https URL), 400
// "url_not_allowed" (a private, loopback or link-local address while the
// server's webhooks.allow_private is off), 400 "invalid_events" (none, or
// an unknown type), 409 "too_many_webhooks" (the owner has 50).
func (c *Client) CreateWebhook(ctx context.Context, r CreateWebhookRequest) (WebhookSecret, error) {
	var w WebhookSecret
	err := c.do(ctx, http.MethodPost, v1+"/webhooks", nil, r, &w)
	return w, err
}

// ListWebhooks lists the owner's endpoints.
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	var res struct {
		Webhooks []Webhook `json:"webhooks"`
	}
	err := c.do(ctx, http.MethodGet, v1+"/webhooks", nil, nil, &res)
	return res.Webhooks, err
}

// GetWebhook reads one endpoint; another owner's is an *APIError 404.
func (c *Client) GetWebhook(ctx context.Context, id string) (Webhook, error) {
	var w Webhook
	err := c.do(ctx, http.MethodGet, webhookPath(id), nil, nil, &w)
	return w, err
}

// UpdateWebhook changes an endpoint and returns it.
func (c *Client) UpdateWebhook(ctx context.Context, id string, r UpdateWebhookRequest) (Webhook, error) {
	var w Webhook
	err := c.do(ctx, http.MethodPatch, webhookPath(id), nil, r, &w)
	return w, err
}

// DeleteWebhook deletes an endpoint; its pending deliveries are not sent.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, webhookPath(id), nil, nil, nil)
}

// RotateWebhookSecret gives an endpoint a new secret. Deliveries carry a
// signature with each of the old and the new secret until
// PreviousSecretExpiresAt, so receivers can switch at their pace.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string) (WebhookSecret, error) {
	var w WebhookSecret
	err := c.do(ctx, http.MethodPost, webhookPath(id)+"/rotate-secret", nil, nil, &w)
	return w, err
}

// ListWebhookDeliveries reads one page of an endpoint's deliveries, newest
// first. limit 0 takes the server's default; cursor is the NextCursor of
// the previous page, or "".
func (c *Client) ListWebhookDeliveries(ctx context.Context, id string, limit int, cursor string) (DeliveryPage, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var p DeliveryPage
	err := c.do(ctx, http.MethodGet, webhookPath(id)+"/deliveries", q, nil, &p)
	return p, err
}

// Redeliver queues a new delivery of a delivery's event to the same
// endpoint, due at once, with the same webhook-id and body, and returns it.
// A disabled endpoint is an *APIError 409 "webhook_disabled": enable it
// first.
func (c *Client) Redeliver(ctx context.Context, id, deliveryID string) (Delivery, error) {
	var d Delivery
	err := c.do(ctx, http.MethodPost, webhookPath(id)+"/deliveries/"+url.PathEscape(deliveryID)+"/redeliver", nil, nil, &d)
	return d, err
}

// RedeliverFailed queues again every event whose last delivery to the
// endpoint failed and was made at or after since, and returns how many.
func (c *Client) RedeliverFailed(ctx context.Context, id string, since time.Time) (int, error) {
	var out struct {
		Redelivered int `json:"redelivered"`
	}
	err := c.do(ctx, http.MethodPost, webhookPath(id)+"/redeliver-failed", nil, map[string]any{"since": since}, &out)
	return out.Redelivered, err
}

func webhookPath(id string) string { return v1 + "/webhooks/" + url.PathEscape(id) }

// WebhookEvent is the body of a webhook delivery. Data is the chat the
// event is about, with the fields a webhook carries: ID, Owner, Title,
// Status, Labels, RequiredAction, LastError and Usage.
type WebhookEvent struct {
	Type      string    `json:"type"` // an Event… constant
	Timestamp time.Time `json:"timestamp"`
	Data      Chat      `json:"data"`
}

// VerifyWebhook checks a delivery's signature with the endpoint's secret
// ("whsec_…") using the Standard Webhooks library, and decodes its body.
// body must be the request body exactly as received; headers are the
// request's (webhook-id, webhook-timestamp, webhook-signature). A
// signature that matches no secret, or a timestamp more than five minutes
// away from now, is an error. Receivers dedupe on the webhook-id header:
// the same event may arrive more than once.
func VerifyWebhook(secret string, body []byte, headers http.Header) (WebhookEvent, error) {
	var ev WebhookEvent
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return ev, fmt.Errorf("webhook secret: %w", err)
	}
	if err := wh.Verify(body, headers); err != nil {
		return ev, err
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return ev, fmt.Errorf("decode webhook body: %w", err)
	}
	return ev, nil
}
