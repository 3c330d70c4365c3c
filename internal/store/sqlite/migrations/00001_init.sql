-- parley's schema on SQLite. Times are INTEGER Unix microseconds (UTC),
-- JSON columns are TEXT, booleans are 0/1.

-- +goose Up
CREATE TABLE owners (
    name       TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE api_tokens (
    id         TEXT PRIMARY KEY,
    owner      TEXT NOT NULL REFERENCES owners (name),
    name       TEXT NOT NULL DEFAULT '',
    hash       BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;

CREATE INDEX api_tokens_created ON api_tokens (created_at, id);
CREATE INDEX api_tokens_owner ON api_tokens (owner, created_at, id);

CREATE TABLE chats (
    id                     TEXT PRIMARY KEY,
    owner                  TEXT NOT NULL REFERENCES owners (name),
    title                  TEXT NOT NULL DEFAULT '',
    model                  TEXT NOT NULL,
    system_prompt          TEXT NOT NULL DEFAULT '',
    status                 TEXT NOT NULL
        CHECK (status IN ('waiting', 'pending', 'running', 'requires_action', 'error')),
    dynamic_tools          TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(dynamic_tools)),
    labels                 TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(labels)),
    archived               INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),
    last_error             TEXT CHECK (last_error IS NULL OR json_valid(last_error)),
    usage_input_tokens     INTEGER NOT NULL DEFAULT 0,
    usage_output_tokens    INTEGER NOT NULL DEFAULT 0,
    usage_cost_micros      INTEGER NOT NULL DEFAULT 0,
    tool_result_timeout_ms INTEGER NOT NULL DEFAULT 0,
    action_deadline        INTEGER,
    worker_id              TEXT NOT NULL DEFAULT '',
    lease_generation       INTEGER NOT NULL DEFAULT 0,
    lease_expires_at       INTEGER,
    interrupt_requested    INTEGER NOT NULL DEFAULT 0 CHECK (interrupt_requested IN (0, 1)),
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL
) STRICT;

-- An owner's chat listing, newest first.
CREATE INDEX chats_owner_created ON chats (owner, created_at DESC, id DESC);
-- Pending chats for the workers, oldest first; expired leases of running chats.
CREATE INDEX chats_status ON chats (status, updated_at);
-- requires_action chats whose deadline passed.
CREATE INDEX chats_action_deadline ON chats (action_deadline) WHERE action_deadline IS NOT NULL;

CREATE TABLE messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id    TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    role       TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    parts      TEXT NOT NULL CHECK (json_valid(parts)),
    usage      TEXT CHECK (usage IS NULL OR json_valid(usage)),
    created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX messages_chat ON messages (chat_id, id);

CREATE TABLE queued_messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id    TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    parts      TEXT NOT NULL CHECK (json_valid(parts)),
    created_at INTEGER NOT NULL
) STRICT;

CREATE INDEX queued_messages_chat ON queued_messages (chat_id, id);

-- +goose Down
DROP TABLE queued_messages;
DROP TABLE messages;
DROP TABLE chats;
DROP TABLE api_tokens;
DROP TABLE owners;
