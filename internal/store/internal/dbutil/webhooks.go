package dbutil

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store"
)

// DisabledByOwner is the reason of an endpoint its owner disabled.
const DisabledByOwner = "disabled by its owner"

// ApplyWebhookPatch applies p to e as of now: a re-enabled endpoint starts
// a new failure streak. It reports whether p disables an enabled endpoint
// (whose pending deliveries must then fail).
func ApplyWebhookPatch(e *store.WebhookEndpoint, p store.WebhookPatch, now time.Time) (disabled bool) {
	if p.URL != nil {
		e.URL = *p.URL
	}
	if p.Events != nil {
		e.Events = p.Events
	}
	if p.Description != nil {
		e.Description = *p.Description
	}
	if p.Disabled != nil {
		switch {
		case *p.Disabled && !e.Disabled:
			e.Disabled, e.DisabledReason, disabled = true, DisabledByOwner, true
		case !*p.Disabled:
			e.Disabled, e.DisabledReason, e.FailureStreak = false, "", 0
		}
	}
	e.UpdatedAt = now
	return disabled
}

// CheckBatchOutcome refuses outcomes that are not ones, and returns o
// with the texts of its outcomes made storable (chat.StorableText): they
// hold what a receiver answered, and an attempt whose record the database
// refused would be sent again at every claim, forever.
func CheckBatchOutcome(o store.BatchOutcome) (store.BatchOutcome, error) {
	if o.ClaimID == "" || o.EndpointID == "" || o.MaxFailures < 0 {
		return o, fmt.Errorf("finish deliveries: want a claim id, an endpoint id and MaxFailures >= 0, got %q, %q, %d",
			o.ClaimID, o.EndpointID, o.MaxFailures)
	}
	o.Outcomes = slices.Clone(o.Outcomes)
	for i := range o.Outcomes {
		d := &o.Outcomes[i]
		switch d.Status {
		case store.DeliveryDelivered, store.DeliveryPending, store.DeliveryFailed:
		default:
			return o, fmt.Errorf("finish delivery %d: invalid status %q", d.ID, d.Status)
		}
		d.Error, d.Disable = chat.StorableText(d.Error), chat.StorableText(d.Disable)
	}
	return o, nil
}

// CheckClaim refuses a claim that asks for nothing or holds nothing.
func CheckClaim(c store.Claim) error {
	if c.ID == "" || c.Max < 1 || c.Batch < 1 || c.TTL <= 0 {
		return fmt.Errorf("claim deliveries: want a claim id, Max >= 1, Batch >= 1 and TTL > 0, got %q, %d, %d, %v",
			c.ID, c.Max, c.Batch, c.TTL)
	}
	return nil
}

// ApplyOutcomes applies the outcomes recorded of a batch, in order, to
// its endpoint as of now: a delivery resets the failure streak, a failed
// delivery grows it, and the endpoint is disabled by an outcome's Disable
// or when the streak reaches maxFailures (if above 0). It reports whether
// the endpoint changed, and whether it was disabled (its pending
// deliveries must then fail).
func ApplyOutcomes(e *store.WebhookEndpoint, outcomes []store.DeliveryOutcome, maxFailures int, now time.Time) (changed, disabled bool) {
	for _, o := range outcomes {
		switch o.Status {
		case store.DeliveryDelivered:
			changed = changed || e.FailureStreak != 0
			e.FailureStreak = 0
		case store.DeliveryFailed:
			changed = true
			e.FailureStreak++
		}
		reason := o.Disable
		if reason == "" && o.Status == store.DeliveryFailed && maxFailures > 0 && e.FailureStreak >= maxFailures {
			reason = fmt.Sprintf("disabled after %d failed deliveries in a row", e.FailureStreak)
		}
		if reason != "" && !e.Disabled {
			e.Disabled, e.DisabledReason, changed, disabled = true, reason, true, true
		}
	}
	if changed {
		e.UpdatedAt = now
	}
	return changed, disabled
}

// EndpointDisabledError is the last_error of a pending delivery failed
// because its endpoint was disabled.
func EndpointDisabledError(reason string) string { return "endpoint disabled: " + reason }

// DeliveryCursor returns the cursor of the page after the delivery id.
func DeliveryCursor(id int64) string { return strconv.FormatInt(id, 10) }

// DeliveryPage is the page of the deliveries read for it: up to limit+1,
// newest first; the one past limit only tells that another page follows.
func DeliveryPage(ds []store.WebhookDelivery, limit int) store.DeliveryPage {
	page := store.DeliveryPage{Deliveries: ds}
	if len(ds) > limit {
		page.Deliveries = ds[:limit]
		page.NextCursor = DeliveryCursor(ds[limit-1].ID)
	}
	return page
}

// DecodeDeliveryCursor reads a DeliveryCursor; "" is the first page
// (math.MaxInt64). store.ErrBadCursor for anything else.
func DecodeDeliveryCursor(cursor string) (int64, error) {
	if cursor == "" {
		return 1<<63 - 1, nil
	}
	id, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || id < 1 {
		return 0, store.ErrBadCursor
	}
	return id, nil
}

// AddToBatch appends a claimed delivery of endpoint e to batches, which
// hold a claim's rows as read, ordered by endpoint: to e's batch if it is
// the last one, else to a new batch of e.
func AddToBatch(batches []store.DeliveryBatch, e store.WebhookEndpoint, d store.ClaimedDelivery) []store.DeliveryBatch {
	if n := len(batches); n > 0 && batches[n-1].Endpoint.ID == e.ID {
		batches[n-1].Deliveries = append(batches[n-1].Deliveries, d)
		return batches
	}
	return append(batches, store.DeliveryBatch{Endpoint: e, Deliveries: []store.ClaimedDelivery{d}})
}

// AllStored returns store.ErrNotFound, naming one, if an event of bodies
// is missing from stored.
func AllStored(bodies, stored map[string][]byte) error {
	for id := range bodies {
		if _, ok := stored[id]; !ok {
			return fmt.Errorf("event %s: %w", id, store.ErrNotFound)
		}
	}
	return nil
}

// Recorded returns the outcomes whose delivery ids are in applied, in
// their order.
func Recorded(outcomes []store.DeliveryOutcome, applied []int64) []store.DeliveryOutcome {
	out := make([]store.DeliveryOutcome, 0, len(applied))
	for _, o := range outcomes {
		if slices.Contains(applied, o.ID) {
			out = append(out, o)
		}
	}
	return out
}
