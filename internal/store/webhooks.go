package store

import (
	"context"
	"slices"
	"time"

	"github.com/parleyhq/parley/internal/chat"
)

// Webhook event types. The stores write them (the outbox, see Webhooks) on
// these changes of a chat:
const (
	// EventCreated: the chat was created (in any status; a fork too).
	EventCreated = "chat.created"
	// EventStatusChanged: every change of status.
	EventStatusChanged = "chat.status_changed"
	// EventActionRequired: the chat became requires_action.
	EventActionRequired = "chat.action_required"
	// EventCompleted: the chat became waiting from running (a run ended,
	// or was interrupted).
	EventCompleted = "chat.completed"
	// EventFailed: the chat became error.
	EventFailed = "chat.failed"
	// EventTitleChanged: the chat's title changed.
	EventTitleChanged = "chat.title_changed"
	// EventAll subscribes an endpoint to every type.
	EventAll = "*"
)

// EventTypes lists every webhook event type, in the order the events of one
// change are written.
var EventTypes = []string{EventCreated, EventStatusChanged, EventActionRequired, EventCompleted, EventFailed, EventTitleChanged}

// KnownEventType reports whether t is an event type or EventAll.
func KnownEventType(t string) bool { return t == EventAll || slices.Contains(EventTypes, t) }

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// WebhookEndpoint is an owner's receiver of webhook events.
type WebhookEndpoint struct {
	ID          string
	Owner       string
	URL         string
	Events      []string // event types, or [EventAll]
	Description string
	// Secret signs every delivery; PreviousSecret (after a rotation) signs
	// too until PreviousSecretUntil.
	Secret              string
	PreviousSecret      string
	PreviousSecretUntil *time.Time
	Disabled            bool
	DisabledReason      string
	// FailureStreak counts the endpoint's deliveries that failed in a row
	// (every attempt failed), reset by a delivered one.
	FailureStreak int
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Secrets returns the secrets that sign a delivery at now: the current
// one, and the previous one until its overlap ends.
func (e WebhookEndpoint) Secrets(now time.Time) []string {
	out := []string{e.Secret}
	if e.PreviousSecret != "" && e.PreviousSecretUntil != nil && now.Before(*e.PreviousSecretUntil) {
		out = append(out, e.PreviousSecret)
	}
	return out
}

// WebhookPatch changes an endpoint; nil fields stay as they are.
type WebhookPatch struct {
	URL         *string
	Events      []string // nil: unchanged
	Description *string
	// Disabled true disables the endpoint (its pending deliveries fail);
	// false enables it again and resets its failure streak.
	Disabled *bool
}

// WebhookEvent is one event of the outbox: which change of which chat, and
// the chat as the change left it.
type WebhookEvent struct {
	ID     string // the webhook-id header, stable across attempts
	Owner  string
	ChatID string
	Type   string
	// Chat is the snapshot: ID, Owner, Title, Status, Labels, LastError,
	// Usage and ActionDeadline are set.
	Chat chat.Chat
	// ThroughMessageID is the chat's newest message id when the event was
	// written, for a requires_action or waiting chat (0 otherwise): its
	// pending calls, or the output of the turn it completed, are read as
	// of it (TurnThrough).
	ThroughMessageID int64
	// Body is the request body once built (nil before).
	Body      []byte
	CreatedAt time.Time
}

// WebhookDelivery is one event's delivery to one endpoint.
type WebhookDelivery struct {
	ID             int64
	EventID        string
	EndpointID     string
	EventType      string
	ChatID         string
	Status         string // DeliveryPending, DeliveryDelivered, DeliveryFailed
	Attempts       int
	NextAttemptAt  *time.Time // set while pending
	LastStatusCode int        // 0: no HTTP answer (yet)
	LastError      string
	CreatedAt      time.Time
	DeliveredAt    *time.Time
}

// DeliveryPage is one page of an endpoint's deliveries, newest first.
type DeliveryPage struct {
	Deliveries []WebhookDelivery
	NextCursor string // "" on the last page
}

// DeliveryBatch is an endpoint a claim holds, with the due deliveries
// it claimed of it, oldest first.
type DeliveryBatch struct {
	Endpoint   WebhookEndpoint
	Deliveries []ClaimedDelivery
}

// ClaimedDelivery is a claimed delivery and the event it sends.
type ClaimedDelivery struct {
	Delivery WebhookDelivery
	Event    WebhookEvent
}

// Claim asks ClaimDeliveries for work.
type Claim struct {
	// ID names the claim, and fences the write of its outcomes: a
	// deliverer makes it unique per claim, so that the late outcomes of a
	// claim that ran out are refused even after it claims again.
	ID    string
	TTL   time.Duration // how long the endpoints are held
	Max   int           // at most this many endpoints
	Batch int           // at most this many deliveries of each
}

// DeliveryOutcome is what became of one attempt.
type DeliveryOutcome struct {
	ID int64
	// Status is DeliveryDelivered, DeliveryPending (another attempt after
	// RetryIn) or DeliveryFailed (no more attempts).
	Status     string
	RetryIn    time.Duration
	StatusCode int // the answer's HTTP status; 0 for none
	Error      string
	// Disable, when not empty, disables the endpoint with this reason
	// (it answered 410 Gone).
	Disable string
}

// BatchOutcome is what became of a claimed batch, as FinishDeliveries
// writes it.
type BatchOutcome struct {
	ClaimID    string
	EndpointID string
	// Outcomes are those of the deliveries attempted, in order. A batch
	// stops at its first attempt that is not delivered, so all but the
	// last are DeliveryDelivered; the deliveries not attempted are due
	// again as they were.
	Outcomes []DeliveryOutcome
	// MaxFailures disables the endpoint when a failed delivery brings its
	// failure streak to it; 0: never.
	MaxFailures int
}

// Webhooks is the store's part for webhooks. Endpoints are owner-scoped:
// another owner's endpoint or delivery is ErrNotFound.
//
// The outbox is the stores' own: a chat's creation and every change of its
// status or title write, in the same transaction, the events some enabled endpoint of the
// owner subscribes to and their deliveries (one per such endpoint).
type Webhooks interface {
	// CreateWebhook stores a new endpoint; it sets CreatedAt and UpdatedAt.
	// ErrNotFound if the owner does not exist; ErrExists on a duplicate id;
	// ErrCapReached if the owner has max endpoints already (0: no cap),
	// counted under the owner's lock (Tx.LockOwner) in the transaction that
	// inserts, so creations that race each other never pass max.
	CreateWebhook(ctx context.Context, e *WebhookEndpoint, max int) error
	// GetWebhook returns one of the owner's endpoints.
	GetWebhook(ctx context.Context, owner, id string) (WebhookEndpoint, error)
	// ListWebhooks returns the owner's endpoints, oldest first.
	ListWebhooks(ctx context.Context, owner string) ([]WebhookEndpoint, error)
	// UpdateWebhook applies p to one of the owner's endpoints and returns it.
	UpdateWebhook(ctx context.Context, owner, id string, p WebhookPatch) (WebhookEndpoint, error)
	// DeleteWebhook removes one of the owner's endpoints and its deliveries.
	DeleteWebhook(ctx context.Context, owner, id string) error
	// RotateWebhookSecret makes secret the endpoint's secret; the one it
	// replaces keeps signing for overlap.
	RotateWebhookSecret(ctx context.Context, owner, id, secret string, overlap time.Duration) (WebhookEndpoint, error)
	// ListDeliveries returns a page of one of the owner's endpoints'
	// deliveries, newest first (limit 1..MaxPageSize). ErrBadCursor for a
	// cursor it did not issue.
	ListDeliveries(ctx context.Context, owner, endpointID, cursor string, limit int) (DeliveryPage, error)
	// Redeliver queues a new delivery of a delivery's event (the same
	// webhook-id) to the same endpoint, due at once, and returns it.
	Redeliver(ctx context.Context, owner, endpointID string, deliveryID int64) (WebhookDelivery, error)
	// RedeliverFailed queues a new delivery, due at once, of every event
	// whose last delivery to one of the owner's endpoints failed and was
	// created at or after since, in event order, and returns how many it
	// queued. ErrNotFound if the endpoint is not the owner's.
	RedeliverFailed(ctx context.Context, owner, endpointID string, since time.Time) (int, error)
	// WebhookEvents returns the owner's events, in the order written, for
	// tests and tools.
	WebhookEvents(ctx context.Context, owner string) ([]WebhookEvent, error)

	// ClaimDeliveries claims, for c.TTL, up to c.Max enabled endpoints
	// that have due pending deliveries and no claim in force (PostgreSQL:
	// FOR UPDATE SKIP LOCKED; a claim that ran out is taken again), with up
	// to c.Batch of each one's oldest due deliveries. While an endpoint is
	// claimed no other claim takes any of its deliveries, so an endpoint
	// receives its events one at a time, in order (a delivery waiting for
	// a retry lets the later ones pass).
	ClaimDeliveries(ctx context.Context, c Claim) ([]DeliveryBatch, error)
	// SetEventBodies stores each event's body (by event id) unless one is
	// stored already, and returns the stored ones: every attempt sends the
	// same bytes. ErrNotFound if an event does not exist.
	SetEventBodies(ctx context.Context, bodies map[string][]byte) (map[string][]byte, error)
	// FinishDeliveries records the outcomes of a claimed batch and the
	// endpoint's failure streak, and releases the endpoint, in one
	// transaction. ErrLeaseLost, writing nothing, if the endpoint is no
	// longer held by o.ClaimID (its claim ran out and another took it).
	FinishDeliveries(ctx context.Context, o BatchOutcome) error
	// OldestDueDelivery returns when the earliest due pending delivery
	// became due; ok false if none is due.
	OldestDueDelivery(ctx context.Context) (due time.Time, ok bool, err error)
	// PruneWebhooks deletes up to limit deliveries that ended (delivered
	// or failed) before before, then the events created before it that no
	// delivery refers to any more, and returns how many rows it deleted.
	PruneWebhooks(ctx context.Context, before time.Time, limit int) (int, error)
	// TurnThrough is LastTurn as of the message id through: the last
	// assistant message at or before it and the messages after it up to
	// it.
	TurnThrough(ctx context.Context, chatID string, through int64) ([]chat.Message, error)
}
