-- chats.lease_recoveries counts the times in a row a chat's lease expired
-- and was recovered (its worker died) since a worker last let go of it, so
-- that a chat whose run keeps killing its worker ends in error instead of
-- being passed on forever.

-- +goose Up
ALTER TABLE chats ADD COLUMN lease_recoveries integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE chats DROP COLUMN lease_recoveries;
