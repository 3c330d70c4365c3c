package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/parleyhq/parley/internal/events"
	"github.com/parleyhq/parley/internal/netguard"
	"github.com/parleyhq/parley/internal/store"
	"github.com/parleyhq/parley/internal/webhook"
)

// The operations on an owner's webhook endpoints and their deliveries.
// Another owner's endpoint or delivery is store.ErrNotFound, as if it did
// not exist.

// WebhookInput is an endpoint's fields as a client sends them; nil fields
// are not given (on create: url is required, events default to none).
type WebhookInput struct {
	URL         *string
	Events      []string
	Description *string
	Disabled    *bool
}

// TooManyWebhooksError refuses an endpoint past the owner's
// webhook.MaxEndpoints.
type TooManyWebhooksError struct{ Limit int }

func (e *TooManyWebhooksError) Error() string {
	return fmt.Sprintf("an owner may have at most %d webhook endpoints; delete one first", e.Limit)
}

// WebhookDisabledError refuses to redeliver to a disabled endpoint.
type WebhookDisabledError struct{ Reason string }

func (e *WebhookDisabledError) Error() string {
	return "the webhook is disabled (" + e.Reason + "); enable it with PATCH {\"disabled\": false} first"
}

// checkWebhook refuses a URL, event list or description that is given and
// not acceptable: a *webhook.URLError, *webhook.EventsError or
// *webhook.DescriptionError.
func (s *Service) checkWebhook(ctx context.Context, in WebhookInput) error {
	if in.URL != nil {
		policy := netguard.NewPolicy(s.cfg.Webhooks.AllowPrivate, nil)
		if err := webhook.CheckURL(ctx, policy, net.DefaultResolver, *in.URL); err != nil {
			return err
		}
	}
	if in.Events != nil {
		if err := webhook.CheckEvents(in.Events); err != nil {
			return err
		}
	}
	if in.Description != nil {
		if err := webhook.CheckDescription(*in.Description); err != nil {
			return err
		}
	}
	return nil
}

// CreateWebhook creates an endpoint of the owner and returns it with its
// secret. The cap of webhook.MaxEndpoints is counted in the transaction
// that inserts (a *TooManyWebhooksError past it), so creations that race
// each other never pass it.
func (s *Service) CreateWebhook(ctx context.Context, owner string, in WebhookInput) (store.WebhookEndpoint, error) {
	if in.URL == nil {
		return store.WebhookEndpoint{}, &webhook.URLError{Code: "invalid_url", Message: "url is required"}
	}
	if in.Events == nil {
		in.Events = []string{}
	}
	if in.Description == nil {
		in.Description = new(string)
	}
	if err := s.checkWebhook(ctx, in); err != nil {
		return store.WebhookEndpoint{}, err
	}
	e := store.WebhookEndpoint{ID: webhook.NewEndpointID(), Owner: owner, URL: *in.URL, Events: in.Events,
		Description: *in.Description, Secret: webhook.NewSecret()}
	err := s.st.CreateWebhook(ctx, &e, webhook.MaxEndpoints)
	if errors.Is(err, store.ErrCapReached) {
		return store.WebhookEndpoint{}, &TooManyWebhooksError{Limit: webhook.MaxEndpoints}
	}
	if err != nil {
		return store.WebhookEndpoint{}, fmt.Errorf("create webhook: %w", err)
	}
	return e, nil
}

// ListWebhooks returns the owner's endpoints, oldest first.
func (s *Service) ListWebhooks(ctx context.Context, owner string) ([]store.WebhookEndpoint, error) {
	list, err := s.st.ListWebhooks(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return list, nil
}

// GetWebhook returns one of the owner's endpoints.
func (s *Service) GetWebhook(ctx context.Context, owner, id string) (store.WebhookEndpoint, error) {
	return s.st.GetWebhook(ctx, owner, id)
}

// UpdateWebhook changes the given fields of one of the owner's endpoints.
func (s *Service) UpdateWebhook(ctx context.Context, owner, id string, in WebhookInput) (store.WebhookEndpoint, error) {
	if err := s.checkWebhook(ctx, in); err != nil {
		return store.WebhookEndpoint{}, err
	}
	return s.st.UpdateWebhook(ctx, owner, id,
		store.WebhookPatch{URL: in.URL, Events: in.Events, Description: in.Description, Disabled: in.Disabled})
}

// DeleteWebhook deletes one of the owner's endpoints and its deliveries.
func (s *Service) DeleteWebhook(ctx context.Context, owner, id string) error {
	return s.st.DeleteWebhook(ctx, owner, id)
}

// RotateWebhookSecret gives one of the owner's endpoints a new secret; the
// old one keeps signing for webhook.SecretOverlap.
func (s *Service) RotateWebhookSecret(ctx context.Context, owner, id string) (store.WebhookEndpoint, error) {
	return s.st.RotateWebhookSecret(ctx, owner, id, webhook.NewSecret(), webhook.SecretOverlap)
}

// ListDeliveries returns a page of one of the owner's endpoints'
// deliveries, newest first.
func (s *Service) ListDeliveries(ctx context.Context, owner, id, cursor string, limit int) (store.DeliveryPage, error) {
	return s.st.ListDeliveries(ctx, owner, id, cursor, limit)
}

// enabledWebhook returns one of the owner's endpoints, a
// *WebhookDisabledError if it is disabled.
func (s *Service) enabledWebhook(ctx context.Context, owner, id string) (store.WebhookEndpoint, error) {
	e, err := s.st.GetWebhook(ctx, owner, id)
	if err != nil {
		return e, err
	}
	if e.Disabled {
		return e, &WebhookDisabledError{Reason: e.DisabledReason}
	}
	return e, nil
}

// Redeliver queues one delivery of an endpoint of the owner again (a new
// delivery of the same event, due at once) and wakes the deliverers.
func (s *Service) Redeliver(ctx context.Context, owner, endpointID string, deliveryID int64) (store.WebhookDelivery, error) {
	e, err := s.enabledWebhook(ctx, owner, endpointID)
	if err != nil {
		return store.WebhookDelivery{}, err
	}
	d, err := s.st.Redeliver(ctx, owner, e.ID, deliveryID)
	if err != nil {
		return d, err
	}
	s.wakeDeliverers(ctx)
	return d, nil
}

// RedeliverFailed queues again, due at once and in event order, every
// event whose last delivery to an endpoint of the owner failed and was
// made at or after since, and returns how many; it wakes the deliverers.
func (s *Service) RedeliverFailed(ctx context.Context, owner, endpointID string, since time.Time) (int, error) {
	e, err := s.enabledWebhook(ctx, owner, endpointID)
	if err != nil {
		return 0, err
	}
	n, err := s.st.RedeliverFailed(ctx, owner, e.ID, since)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		s.wakeDeliverers(ctx)
	}
	return n, nil
}

// wakeDeliverers tells the deliverers of every replica that a delivery is
// due; a lost wake-up costs a poll interval.
func (s *Service) wakeDeliverers(ctx context.Context) {
	if err := s.ps.Publish(ctx, events.WebhookTopic, nil); err != nil {
		s.log.Warn("webhook deliverers not woken; they poll", "err", err)
	}
}
