package dbutil

import (
	"fmt"
	"time"

	"github.com/parleyhq/parley/internal/store"
)

// endpointDest returns the destinations of the endpoint columns into e:
// id, owner, url, events (a JSON array), description, secret,
// previous_secret, previous_secret_until, disabled, disabled_reason,
// failure_streak, created_at, updated_at.
func endpointDest(e *store.WebhookEndpoint) []any {
	return []any{&e.ID, &e.Owner, &e.URL, JSONStrings(&e.Events), &e.Description, &e.Secret, &e.PreviousSecret,
		NullTime(&e.PreviousSecretUntil), &e.Disabled, &e.DisabledReason, &e.FailureStreak,
		Time(&e.CreatedAt), Time(&e.UpdatedAt)}
}

// ScanEndpoint reads one row of the endpoint columns (see endpointDest).
func ScanEndpoint(row Row) (store.WebhookEndpoint, error) {
	var e store.WebhookEndpoint
	err := row.Scan(endpointDest(&e)...)
	return e, err
}

// deliveryScan reads DeliveryColumns.
type deliveryScan struct {
	d    store.WebhookDelivery
	next time.Time
}

func (s *deliveryScan) dest() []any {
	d := &s.d
	return []any{&d.ID, &d.EventID, &d.EndpointID, &d.EventType, &d.ChatID, &d.Status, &d.Attempts,
		Time(&s.next), &d.LastStatusCode, &d.LastError, Time(&d.CreatedAt), NullTime(&d.DeliveredAt)}
}

// finish sets the next attempt, which only a pending delivery has.
func (s *deliveryScan) finish() store.WebhookDelivery {
	if s.d.Status == store.DeliveryPending {
		next := s.next
		s.d.NextAttemptAt = &next
	}
	return s.d
}

// ScanDelivery reads one row of DeliveryColumns.
func ScanDelivery(row Row) (store.WebhookDelivery, error) {
	var s deliveryScan
	if err := row.Scan(s.dest()...); err != nil {
		return s.d, err
	}
	return s.finish(), nil
}

// eventScan reads EventColumns.
type eventScan struct {
	ev              store.WebhookEvent
	labels, lastErr []byte
}

func (s *eventScan) dest() []any {
	ev := &s.ev
	c := &ev.Chat
	return []any{&ev.ID, &ev.Owner, &ev.ChatID, &ev.Type, &c.Title, (*string)(&c.Status), &s.labels, &s.lastErr,
		&c.Usage.InputTokens, &c.Usage.OutputTokens, &c.Usage.CostMicros, NullTime(&c.ActionDeadline),
		&ev.ThroughMessageID, &ev.Body, Time(&ev.CreatedAt)}
}

// finish decodes the chat the event carries.
func (s *eventScan) finish() (store.WebhookEvent, error) {
	c := &s.ev.Chat
	if err := DecodeChat(c, []byte("[]"), s.labels, s.lastErr); err != nil {
		return s.ev, fmt.Errorf("decode event %s: %w", s.ev.ID, err)
	}
	c.ID, c.Owner = s.ev.ChatID, s.ev.Owner
	return s.ev, nil
}

// ScanEvent reads one row of EventColumns.
func ScanEvent(row Row) (store.WebhookEvent, error) {
	var s eventScan
	if err := row.Scan(s.dest()...); err != nil {
		return s.ev, err
	}
	return s.finish()
}

// ScanClaimed reads one row of EventColumns, DeliveryColumns and the
// endpoint columns, in that order: a delivery claimed with its event and
// endpoint.
func ScanClaimed(row Row) (store.WebhookEndpoint, store.ClaimedDelivery, error) {
	var (
		e  store.WebhookEndpoint
		ev eventScan
		d  deliveryScan
	)
	dest := append(append(ev.dest(), d.dest()...), endpointDest(&e)...)
	if err := row.Scan(dest...); err != nil {
		return e, store.ClaimedDelivery{}, err
	}
	event, err := ev.finish()
	return e, store.ClaimedDelivery{Event: event, Delivery: d.finish()}, err
}
