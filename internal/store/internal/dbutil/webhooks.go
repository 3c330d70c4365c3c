package dbutil

import (
	"fmt"
	"strconv"
	"time"

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

// CheckDeliveryOutcome refuses an outcome that is not one.
func CheckDeliveryOutcome(o store.DeliveryOutcome) error {
	switch o.Status {
	case store.DeliveryDelivered, store.DeliveryPending, store.DeliveryFailed:
	default:
		return fmt.Errorf("finish delivery %d: invalid status %q", o.ID, o.Status)
	}
	if o.WorkerID == "" {
		return fmt.Errorf("finish delivery %d: empty worker id", o.ID)
	}
	return nil
}

// CheckClaim refuses a claim that asks for nothing or holds nothing.
func CheckClaim(c store.Claim) error {
	if c.WorkerID == "" || c.Max < 1 || c.TTL <= 0 {
		return fmt.Errorf("claim deliveries: want a worker id, Max >= 1 and TTL > 0, got %q, %d, %v", c.WorkerID, c.Max, c.TTL)
	}
	return nil
}

// EndpointDisabledError is the last_error of a pending delivery failed
// because its endpoint was disabled.
func EndpointDisabledError(reason string) string { return "endpoint disabled: " + reason }

// DeliveryCursor returns the cursor of the page after the delivery id.
func DeliveryCursor(id int64) string { return strconv.FormatInt(id, 10) }

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
