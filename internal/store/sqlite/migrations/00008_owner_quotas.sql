-- Per-owner quotas and fair scheduling. owner_quotas holds the limits an
-- admin set for one owner (JSON with the keys of the configuration's
-- quotas.defaults; a key absent takes the default). owner_usage is the
-- usage ledger the budgets are reckoned from: each step's usage is added to
-- its owner's row of the UTC day (YYYY-MM-DD), in the transaction that adds
-- it to the chat.

-- +goose Up
CREATE TABLE owner_quotas (
    owner      TEXT PRIMARY KEY REFERENCES owners (name),
    overrides  TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL
);

CREATE TABLE owner_usage (
    owner         TEXT NOT NULL REFERENCES owners (name),
    day           TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_micros   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (owner, day)
) WITHOUT ROWID;
-- OwnerStats: the owners with usage from a day on.
CREATE INDEX owner_usage_day ON owner_usage (day);

-- AcquireChats: each owner's pending chats, longest waiting first.
CREATE INDEX chats_pending_owner ON chats (owner, updated_at, id) WHERE status = 'pending';
-- AcquireChats: each owner's running chats, counted against max_running.
CREATE INDEX chats_running_owner ON chats (owner) WHERE status = 'running';

-- +goose Down
DROP INDEX chats_running_owner;
DROP INDEX chats_pending_owner;
DROP TABLE owner_usage;
DROP TABLE owner_quotas;
