-- Structured output: the chat's response format (ResponseFormat JSON, NULL:
-- free text); the format of the turn in progress, set by the user message
-- that started it (NULL: the chat's own; {"type": "text"}: none for this
-- turn); the repair turns made in it; and a queued message's format, which
-- it takes into the history. The outbox's events of a chat that became
-- waiting name its newest message, so chat.completed carries the output of
-- the turn it completes.

-- +goose Up
ALTER TABLE chats ADD COLUMN response_format TEXT;
ALTER TABLE chats ADD COLUMN turn_format TEXT;
ALTER TABLE chats ADD COLUMN output_repairs INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queued_messages ADD COLUMN response_format TEXT;

DROP TRIGGER chats_webhook_events;
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
        CASE WHEN NEW.status IN ('requires_action', 'waiting')
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

-- +goose Down
DROP TRIGGER chats_webhook_events;
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
ALTER TABLE queued_messages DROP COLUMN response_format;
ALTER TABLE chats DROP COLUMN output_repairs;
ALTER TABLE chats DROP COLUMN turn_format;
ALTER TABLE chats DROP COLUMN response_format;
