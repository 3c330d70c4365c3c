-- Long conversations. messages.superseded marks a message an edit or a
-- regeneration replaced: kept, but hidden from the model and from normal
-- reads. messages.compaction_through is, for a compaction message, the id
-- of the last message its summary stands for (NULL for any other message),
-- so that a chat's newest compaction is found on an index whatever the
-- history's length. chats.compact_requested asks the chat's next run to
-- compact its history.

-- +goose Up
ALTER TABLE messages ADD COLUMN superseded boolean NOT NULL DEFAULT false;
ALTER TABLE messages ADD COLUMN compaction_through bigint;
-- SinceCompaction: a chat's newest compaction still in force. An update
-- that supersedes a compaction takes it out of the index; the query names
-- both terms of the predicate.
CREATE INDEX messages_compaction ON messages (chat_id, id)
    WHERE compaction_through IS NOT NULL AND NOT superseded;
ALTER TABLE chats ADD COLUMN compact_requested boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE chats DROP COLUMN compact_requested;
DROP INDEX messages_compaction;
ALTER TABLE messages DROP COLUMN compaction_through;
ALTER TABLE messages DROP COLUMN superseded;
