-- parley's schema on PostgreSQL. Keys use the "C" collation so that ordering
-- by id is bytewise, as on SQLite. JSON that is only stored and read back is
-- json (kept byte for byte: tool arguments keep their key order); labels are
-- jsonb for the @> filter.

-- +goose Up
CREATE TABLE owners (
    name       text COLLATE "C" PRIMARY KEY,
    created_at timestamptz NOT NULL
);

CREATE TABLE api_tokens (
    id         text COLLATE "C" PRIMARY KEY,
    owner      text COLLATE "C" NOT NULL REFERENCES owners (name),
    name       text NOT NULL DEFAULT '',
    hash       bytea NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);

CREATE INDEX api_tokens_created ON api_tokens (created_at, id);
CREATE INDEX api_tokens_owner ON api_tokens (owner, created_at, id);

CREATE TABLE chats (
    id                     text COLLATE "C" PRIMARY KEY,
    owner                  text COLLATE "C" NOT NULL REFERENCES owners (name),
    title                  text NOT NULL DEFAULT '',
    model                  text NOT NULL,
    system_prompt          text NOT NULL DEFAULT '',
    status                 text NOT NULL
        CHECK (status IN ('waiting', 'pending', 'running', 'requires_action', 'error')),
    dynamic_tools          json NOT NULL DEFAULT '[]',
    labels                 jsonb NOT NULL DEFAULT '{}',
    archived               boolean NOT NULL DEFAULT false,
    last_error             json,
    usage_input_tokens     bigint NOT NULL DEFAULT 0,
    usage_output_tokens    bigint NOT NULL DEFAULT 0,
    usage_cost_micros      bigint NOT NULL DEFAULT 0,
    tool_result_timeout_ms bigint NOT NULL DEFAULT 0,
    action_deadline        timestamptz,
    worker_id              text NOT NULL DEFAULT '',
    lease_generation       bigint NOT NULL DEFAULT 0,
    lease_expires_at       timestamptz,
    interrupt_requested    boolean NOT NULL DEFAULT false,
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL
);

-- An owner's chat listing, newest first.
CREATE INDEX chats_owner_created ON chats (owner, created_at DESC, id DESC);
-- Pending chats for the workers, oldest first; expired leases of running chats.
CREATE INDEX chats_status ON chats (status, updated_at);
-- requires_action chats whose deadline passed.
CREATE INDEX chats_action_deadline ON chats (action_deadline) WHERE action_deadline IS NOT NULL;
-- The label filter (labels @> '{"k": "v"}').
CREATE INDEX chats_labels ON chats USING gin (labels jsonb_path_ops);

CREATE TABLE messages (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chat_id    text COLLATE "C" NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    parts      json NOT NULL,
    usage      json,
    created_at timestamptz NOT NULL
);

CREATE INDEX messages_chat ON messages (chat_id, id);

CREATE TABLE queued_messages (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chat_id    text COLLATE "C" NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    parts      json NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX queued_messages_chat ON queued_messages (chat_id, id);

-- NOTIFY payloads over PostgreSQL's 8000-byte limit: the pubsub stores them
-- here and notifies only the row id.
CREATE TABLE pubsub_payloads (
    id         bigserial PRIMARY KEY,
    payload    bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE pubsub_payloads;
DROP TABLE queued_messages;
DROP TABLE messages;
DROP TABLE chats;
DROP TABLE api_tokens;
DROP TABLE owners;
