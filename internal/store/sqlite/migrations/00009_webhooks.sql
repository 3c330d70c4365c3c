-- Webhooks. webhook_endpoints are an owner's receivers; webhook_events is
-- the outbox: a trigger on chats writes an event, in the transaction that
-- changes the chat, for each kind of change some enabled endpoint of the
-- chat's owner subscribes to, and a trigger on webhook_events writes one
-- webhook_deliveries row per such endpoint. Whatever path changes a chat
-- (a worker's step, the API, acquisition, lease recovery, an expired
-- deadline, a generated title) is covered, a rollback writes no event,
-- and a committed change never loses one.
--
-- An event keeps a snapshot of the chat as the change left it; body is
-- the request body, built once from the snapshot by the first delivery
-- attempt, so every attempt of every endpoint sends the same bytes.
-- through_message_id is the chat's newest message when the event was
-- written: a requires_action chat's pending calls are read as of it.

-- +goose Up
CREATE TABLE webhook_endpoints (
    id                    TEXT PRIMARY KEY,
    owner                 TEXT NOT NULL REFERENCES owners (name),
    url                   TEXT NOT NULL,
    events                TEXT NOT NULL CHECK (json_valid(events)), -- JSON array of types, or ["*"]
    description           TEXT NOT NULL DEFAULT '',
    secret                TEXT NOT NULL,
    previous_secret       TEXT NOT NULL DEFAULT '',
    previous_secret_until INTEGER,
    disabled              INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
    disabled_reason       TEXT NOT NULL DEFAULT '',
    failure_streak        INTEGER NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
) STRICT;

-- An owner's endpoints, oldest first; the triggers' look-up by owner.
CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner, created_at, id);

CREATE TABLE webhook_events (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    owner               TEXT NOT NULL,
    chat_id             TEXT NOT NULL, -- no foreign key: a deleted chat's events still go out
    type                TEXT NOT NULL,
    title               TEXT NOT NULL,
    status              TEXT NOT NULL,
    labels              TEXT NOT NULL,
    last_error          TEXT,
    usage_input_tokens  INTEGER NOT NULL,
    usage_output_tokens INTEGER NOT NULL,
    usage_cost_micros   INTEGER NOT NULL,
    action_deadline     INTEGER,
    through_message_id  INTEGER NOT NULL DEFAULT 0,
    body                BLOB,
    created_at          INTEGER NOT NULL
) STRICT;

CREATE TABLE webhook_deliveries (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id         TEXT NOT NULL REFERENCES webhook_events (id),
    endpoint_id      TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    status           TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    lease_until      INTEGER,
    leased_by        TEXT NOT NULL DEFAULT '',
    last_status_code INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    delivered_at     INTEGER
) STRICT;

-- ClaimDeliveries: the due ones, earliest first; each endpoint's pending
-- ones in event order.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_endpoint_pending ON webhook_deliveries (endpoint_id, id) WHERE status = 'pending';
-- An endpoint's deliveries, newest first.
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- The outbox. The events of one change are written in this order:
-- status_changed, then action_required / completed / failed, then
-- title_changed. The chat's updated_at is the change's time.
-- +goose StatementBegin
CREATE TRIGGER chats_webhook_events AFTER UPDATE OF status, title ON chats
WHEN (NEW.status IS NOT OLD.status OR NEW.title IS NOT OLD.title)
    AND EXISTS (SELECT 1 FROM webhook_endpoints WHERE owner = NEW.owner AND disabled = 0)
BEGIN
    INSERT INTO webhook_events (id, owner, chat_id, type, title, status, labels, last_error,
        usage_input_tokens, usage_output_tokens, usage_cost_micros, action_deadline,
        through_message_id, created_at)
    SELECT 'msg_' || lower(hex(randomblob(16))), NEW.owner, NEW.id, t.type, NEW.title, NEW.status,
        NEW.labels, NEW.last_error, NEW.usage_input_tokens, NEW.usage_output_tokens,
        NEW.usage_cost_micros, NEW.action_deadline,
        CASE WHEN NEW.status = 'requires_action'
            THEN coalesce((SELECT max(id) FROM messages WHERE chat_id = NEW.id), 0) ELSE 0 END,
        NEW.updated_at
    FROM (SELECT 1 AS ord, 'chat.status_changed' AS type WHERE NEW.status IS NOT OLD.status
        UNION ALL SELECT 2, 'chat.action_required'
            WHERE NEW.status = 'requires_action' AND OLD.status IS NOT 'requires_action'
        UNION ALL SELECT 3, 'chat.completed' WHERE NEW.status = 'waiting' AND OLD.status = 'running'
        UNION ALL SELECT 4, 'chat.failed' WHERE NEW.status = 'error' AND OLD.status IS NOT 'error'
        UNION ALL SELECT 5, 'chat.title_changed' WHERE NEW.title IS NOT OLD.title) AS t
    WHERE EXISTS (SELECT 1 FROM webhook_endpoints p, json_each(p.events) j
        WHERE p.owner = NEW.owner AND p.disabled = 0 AND j.value IN (t.type, '*'))
    ORDER BY t.ord;
END;
-- +goose StatementEnd

-- The fan-out: one delivery per enabled endpoint of the owner subscribed
-- to the event's type, due at once.
-- +goose StatementBegin
CREATE TRIGGER webhook_events_deliveries AFTER INSERT ON webhook_events
BEGIN
    INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at, created_at)
    SELECT NEW.id, p.id, NEW.created_at, NEW.created_at
    FROM webhook_endpoints p
    WHERE p.owner = NEW.owner AND p.disabled = 0
        AND EXISTS (SELECT 1 FROM json_each(p.events) j WHERE j.value IN (NEW.type, '*'))
    ORDER BY p.created_at, p.id;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER webhook_events_deliveries;
DROP TRIGGER chats_webhook_events;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
