-- The outbox writes a chat.created event, the chat as created, in the
-- transaction that inserts it, when an enabled endpoint of the owner
-- subscribes to it (or to every type).

-- +goose Up
-- +goose StatementBegin
CREATE TRIGGER chats_webhook_created AFTER INSERT ON chats
WHEN EXISTS (SELECT 1 FROM webhook_endpoints p, json_each(p.events) j
    WHERE p.owner = NEW.owner AND p.disabled = 0 AND j.value IN ('chat.created', '*'))
BEGIN
    INSERT INTO webhook_events (id, owner, chat_id, type, title, status, labels, last_error,
        usage_input_tokens, usage_output_tokens, usage_cost_micros, action_deadline,
        through_message_id, created_at)
    VALUES ('msg_' || lower(hex(randomblob(16))), NEW.owner, NEW.id, 'chat.created', NEW.title, NEW.status,
        NEW.labels, NEW.last_error, NEW.usage_input_tokens, NEW.usage_output_tokens,
        NEW.usage_cost_micros, NEW.action_deadline, 0, NEW.created_at);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER chats_webhook_created;
