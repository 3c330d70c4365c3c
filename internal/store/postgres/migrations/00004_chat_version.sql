-- chats.version grows by one with every change of a chat that moves
-- updated_at: a stream or a client tells an older copy of a chat from a
-- newer one by it, whatever order events arrive in.

-- +goose Up
ALTER TABLE chats ADD COLUMN version bigint NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE chats DROP COLUMN version;
