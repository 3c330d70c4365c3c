-- Which chats use which files, so that bytes nothing uses can be purged.
-- A chat uses a file when one of its messages (superseded ones included)
-- or queued messages has a file part naming it; the row stays until the
-- chat is deleted. A deleted file that no chat uses loses its row, and a
-- blob that no file row names loses its bytes (file_chunks): an owner's
-- stored bytes are the blobs it has, each counted once however many files
-- name it (the max_file_bytes quota).

-- +goose Up
CREATE TABLE file_refs (
    file_id TEXT NOT NULL,
    chat_id TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    PRIMARY KEY (file_id, chat_id)
) STRICT;
CREATE INDEX file_refs_chat ON file_refs (chat_id);

INSERT INTO file_refs (file_id, chat_id)
SELECT DISTINCT json_extract(p.value, '$.file_id'), m.chat_id
  FROM messages m, json_each(m.parts) p
 WHERE json_extract(p.value, '$.type') = 'file'
   AND json_extract(p.value, '$.file_id') IN (SELECT id FROM files)
UNION
SELECT json_extract(p.value, '$.file_id'), m.chat_id
  FROM queued_messages m, json_each(m.parts) p
 WHERE json_extract(p.value, '$.type') = 'file'
   AND json_extract(p.value, '$.file_id') IN (SELECT id FROM files);

-- The blobs of an owner that file rows name (the purge), and its deleted
-- files (the purge's candidates).
CREATE INDEX files_owner_sha256 ON files (owner, sha256);
CREATE INDEX files_owner_deleted ON files (owner) WHERE deleted_at IS NOT NULL;

-- +goose Down
DROP INDEX files_owner_deleted;
DROP INDEX files_owner_sha256;
DROP TABLE file_refs;
