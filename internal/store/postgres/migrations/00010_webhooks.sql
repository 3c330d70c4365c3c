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
    id                    text COLLATE "C" PRIMARY KEY,
    owner                 text COLLATE "C" NOT NULL REFERENCES owners (name),
    url                   text NOT NULL,
    events                text[] NOT NULL, -- types, or {'*'}
    description           text NOT NULL DEFAULT '',
    secret                text NOT NULL,
    previous_secret       text NOT NULL DEFAULT '',
    previous_secret_until timestamptz,
    disabled              boolean NOT NULL DEFAULT false,
    disabled_reason       text NOT NULL DEFAULT '',
    failure_streak        integer NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL
);

-- An owner's endpoints, oldest first; the triggers' look-up by owner.
CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner, created_at, id);

CREATE TABLE webhook_events (
    seq                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                  text COLLATE "C" NOT NULL UNIQUE,
    owner               text COLLATE "C" NOT NULL,
    chat_id             text COLLATE "C" NOT NULL, -- no foreign key: a deleted chat's events still go out
    type                text NOT NULL,
    title               text NOT NULL,
    status              text NOT NULL,
    labels              jsonb NOT NULL,
    last_error          json,
    usage_input_tokens  bigint NOT NULL,
    usage_output_tokens bigint NOT NULL,
    usage_cost_micros   bigint NOT NULL,
    action_deadline     timestamptz,
    through_message_id  bigint NOT NULL DEFAULT 0,
    body                bytea,
    created_at          timestamptz NOT NULL
);

CREATE TABLE webhook_deliveries (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id         text COLLATE "C" NOT NULL REFERENCES webhook_events (id),
    endpoint_id      text COLLATE "C" NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    lease_until      timestamptz,
    leased_by        text NOT NULL DEFAULT '',
    last_status_code integer NOT NULL DEFAULT 0,
    last_error       text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    delivered_at     timestamptz
);

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
CREATE FUNCTION parley_webhook_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_events (id, owner, chat_id, type, title, status, labels, last_error,
        usage_input_tokens, usage_output_tokens, usage_cost_micros, action_deadline,
        through_message_id, created_at)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), NEW.owner, NEW.id, t.type, NEW.title,
        NEW.status, NEW.labels, NEW.last_error, NEW.usage_input_tokens, NEW.usage_output_tokens,
        NEW.usage_cost_micros, NEW.action_deadline,
        CASE WHEN NEW.status = 'requires_action'
            THEN coalesce((SELECT max(id) FROM messages WHERE chat_id = NEW.id), 0) ELSE 0 END,
        NEW.updated_at
    FROM (VALUES
        (1, 'chat.status_changed', NEW.status IS DISTINCT FROM OLD.status),
        (2, 'chat.action_required', NEW.status = 'requires_action' AND OLD.status IS DISTINCT FROM 'requires_action'),
        (3, 'chat.completed', NEW.status = 'waiting' AND OLD.status = 'running'),
        (4, 'chat.failed', NEW.status = 'error' AND OLD.status IS DISTINCT FROM 'error'),
        (5, 'chat.title_changed', NEW.title IS DISTINCT FROM OLD.title)) AS t (ord, type, fires)
    WHERE t.fires AND EXISTS (SELECT 1 FROM webhook_endpoints p
        WHERE p.owner = NEW.owner AND NOT p.disabled AND p.events && ARRAY[t.type, '*'])
    ORDER BY t.ord;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER chats_webhook_events AFTER UPDATE OF status, title ON chats
FOR EACH ROW
WHEN (NEW.status IS DISTINCT FROM OLD.status OR NEW.title IS DISTINCT FROM OLD.title)
EXECUTE FUNCTION parley_webhook_events();

-- The fan-out: one delivery per enabled endpoint of the owner subscribed
-- to the event's type, due at once.
-- +goose StatementBegin
CREATE FUNCTION parley_webhook_deliveries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at, created_at)
    SELECT NEW.id, p.id, now(), now()
    FROM webhook_endpoints p
    WHERE p.owner = NEW.owner AND NOT p.disabled AND p.events && ARRAY[NEW.type, '*']
    ORDER BY p.created_at, p.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER webhook_events_deliveries AFTER INSERT ON webhook_events
FOR EACH ROW EXECUTE FUNCTION parley_webhook_deliveries();

-- +goose Down
DROP TRIGGER webhook_events_deliveries ON webhook_events;
DROP FUNCTION parley_webhook_deliveries();
DROP TRIGGER chats_webhook_events ON chats;
DROP FUNCTION parley_webhook_events();
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
