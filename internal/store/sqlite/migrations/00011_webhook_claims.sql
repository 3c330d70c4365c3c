-- Webhook deliveries are claimed by endpoint. A deliverer claims an
-- endpoint (claimed_by, claimed_until) with a batch of its oldest due
-- deliveries, sends them one at a time in order, and records their
-- outcomes together, which releases the claim. While an endpoint is
-- claimed no other deliverer takes any of its deliveries, so an endpoint
-- receives its events in order; a claim whose deliverer died runs out at
-- claimed_until. A delivery's leased_by names the claim that took it last:
-- the write of its outcome is fenced by it.

-- +goose Up
ALTER TABLE webhook_endpoints ADD COLUMN claimed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE webhook_endpoints ADD COLUMN claimed_until INTEGER;
ALTER TABLE webhook_deliveries DROP COLUMN lease_until;
-- An endpoint's due deliveries: whether it has any, and the oldest.
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';

-- +goose Down
DROP INDEX webhook_deliveries_endpoint_due;
ALTER TABLE webhook_deliveries ADD COLUMN lease_until INTEGER;
ALTER TABLE webhook_endpoints DROP COLUMN claimed_until;
ALTER TABLE webhook_endpoints DROP COLUMN claimed_by;
