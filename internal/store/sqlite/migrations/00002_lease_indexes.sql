-- Partial indexes for the engine's queries, each over the chats of one
-- status. They replace the broader indexes of 00001 for the same queries.
-- The queries name their status as a literal, which SQLite's planner needs
-- to use a partial index.

-- +goose Up
DROP INDEX chats_status;
DROP INDEX chats_action_deadline;
-- AcquireChat: pending chats, longest waiting first.
CREATE INDEX chats_pending ON chats (updated_at, id) WHERE status = 'pending';
-- RecoverExpiredLeases: running chats by lease expiry.
CREATE INDEX chats_running_lease ON chats (lease_expires_at) WHERE status = 'running';
-- ExpiredActions: requires_action chats, earliest deadline first.
CREATE INDEX chats_action_deadline ON chats (action_deadline, id) WHERE status = 'requires_action';

-- +goose Down
DROP INDEX chats_action_deadline;
DROP INDEX chats_running_lease;
DROP INDEX chats_pending;
CREATE INDEX chats_action_deadline ON chats (action_deadline) WHERE action_deadline IS NOT NULL;
CREATE INDEX chats_status ON chats (status, updated_at);
