-- Long conversations. messages.superseded marks a message an edit or a
-- regeneration replaced: kept, but hidden from the model and from normal
-- reads. messages.compaction_through is, for a compaction message, the id
-- of the last message its summary stands for (NULL for any other message),
-- so that a chat's newest compaction is found on an index whatever the
-- history's length. chats.compact_requested asks the chat's next run to
-- compact its history.

-- +goose Up
ALTER TABLE messages ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0 CHECK (superseded IN (0, 1));
ALTER TABLE messages ADD COLUMN compaction_through INTEGER;
-- SinceCompaction: a chat's newest compaction still in force. SQLite keeps
-- a partial index up to date when an update moves a row in or out of it;
-- the query names both terms, as the planner needs to use the index.
CREATE INDEX messages_compaction ON messages (chat_id, id)
    WHERE compaction_through IS NOT NULL AND superseded = 0;
ALTER TABLE chats ADD COLUMN compact_requested INTEGER NOT NULL DEFAULT 0 CHECK (compact_requested IN (0, 1));

-- +goose Down
ALTER TABLE chats DROP COLUMN compact_requested;
DROP INDEX messages_compaction;
ALTER TABLE messages DROP COLUMN compaction_through;
ALTER TABLE messages DROP COLUMN superseded;
