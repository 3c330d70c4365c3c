-- chats.tools is the chat's selection of server-side tools: a JSON array of
-- globs over tool names, or NULL when the chat takes every tool.

-- +goose Up
ALTER TABLE chats ADD COLUMN tools json;

-- +goose Down
ALTER TABLE chats DROP COLUMN tools;
