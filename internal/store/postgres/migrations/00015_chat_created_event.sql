-- The outbox writes a chat.created event, the chat as created, in the
-- transaction that inserts it, when an enabled endpoint of the owner
-- subscribes to it (or to every type).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION parley_webhook_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_events (id, owner, chat_id, type, title, status, labels, last_error,
        usage_input_tokens, usage_output_tokens, usage_cost_micros, action_deadline,
        through_message_id, created_at)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), NEW.owner, NEW.id, 'chat.created', NEW.title,
        NEW.status, NEW.labels, NEW.last_error, NEW.usage_input_tokens, NEW.usage_output_tokens,
        NEW.usage_cost_micros, NEW.action_deadline, 0, NEW.created_at
    WHERE EXISTS (SELECT 1 FROM webhook_endpoints p
        WHERE p.owner = NEW.owner AND NOT p.disabled AND p.events && ARRAY['chat.created', '*']);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER chats_webhook_created AFTER INSERT ON chats
FOR EACH ROW EXECUTE FUNCTION parley_webhook_created();

-- +goose Down
DROP TRIGGER chats_webhook_created ON chats;
DROP FUNCTION parley_webhook_created();
