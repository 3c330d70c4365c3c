-- Structured output: the chat's response format (ResponseFormat JSON, NULL:
-- free text); the format of the turn in progress, set by the user message
-- that started it (NULL: the chat's own; {"type": "text"}: none for this
-- turn); the repair turns made in it; and a queued message's format, which
-- it takes into the history. The outbox's events of a chat that became
-- waiting name its newest message, so chat.completed carries the output of
-- the turn it completes.

-- +goose Up
ALTER TABLE chats ADD COLUMN response_format text;
ALTER TABLE chats ADD COLUMN turn_format text;
ALTER TABLE chats ADD COLUMN output_repairs integer NOT NULL DEFAULT 0;
ALTER TABLE queued_messages ADD COLUMN response_format text;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION parley_webhook_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_events (id, owner, chat_id, type, title, status, labels, last_error,
        usage_input_tokens, usage_output_tokens, usage_cost_micros, action_deadline,
        through_message_id, created_at)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), NEW.owner, NEW.id, t.type, NEW.title,
        NEW.status, NEW.labels, NEW.last_error, NEW.usage_input_tokens, NEW.usage_output_tokens,
        NEW.usage_cost_micros, NEW.action_deadline,
        CASE WHEN NEW.status IN ('requires_action', 'waiting')
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION parley_webhook_events() RETURNS trigger
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

ALTER TABLE queued_messages DROP COLUMN response_format;
ALTER TABLE chats DROP COLUMN output_repairs;
ALTER TABLE chats DROP COLUMN turn_format;
ALTER TABLE chats DROP COLUMN response_format;
