-- Message versions. messages.parent_id is, on a superseded message, the
-- message it followed when it was written (0: it was the chat's first
-- message); NULL on every message of the history, which follows the
-- message before it (compactions aside). Messages with the same parent
-- are versions of one another: an edit or a regeneration wrote the newer.
-- Messages superseded before this column existed get a best guess: the
-- message before them, or, for an answer after an answer (a
-- regeneration), the last message of the history before them.

-- +goose Up
ALTER TABLE messages ADD COLUMN parent_id INTEGER;
UPDATE messages SET parent_id = coalesce((
        SELECT p.id FROM messages p
        WHERE p.chat_id = messages.chat_id AND p.id < messages.id AND p.compaction_through IS NULL
            AND NOT (messages.role = 'assistant' AND p.role = 'assistant' AND p.superseded = 1)
            AND (p.superseded = 0 OR NOT EXISTS (SELECT 1 FROM messages q
                WHERE q.chat_id = messages.chat_id AND q.id > p.id AND q.id < messages.id
                    AND q.compaction_through IS NULL AND q.superseded = 0))
        ORDER BY p.id DESC LIMIT 1), 0)
    WHERE superseded = 1;
-- MessageVersions: the versions of a message, by their parent.
CREATE INDEX messages_parent ON messages (chat_id, parent_id) WHERE parent_id IS NOT NULL;

-- +goose Down
DROP INDEX messages_parent;
ALTER TABLE messages DROP COLUMN parent_id;
