-- chats.approve names the server-side tools whose calls wait for a person's
-- decision in this chat, on top of the server's policy: a JSON array of
-- globs over tool names, or NULL for none.

-- +goose Up
ALTER TABLE chats ADD COLUMN approve TEXT CHECK (approve IS NULL OR json_valid(approve));

-- +goose Down
ALTER TABLE chats DROP COLUMN approve;
