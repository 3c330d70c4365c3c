-- Uploaded files. A file's bytes are stored once per owner and sha256
-- (file_blobs), as rows of file_chunks of at most 1 MiB each, so neither a
-- write nor a read ever holds a whole file; files are the names owners gave
-- them, several of which may share one blob. A deleted file keeps its row
-- (deleted_at set) and its blob: messages that use it still read it.

-- +goose Up
CREATE TABLE file_blobs (
    owner      TEXT NOT NULL REFERENCES owners (name),
    sha256     TEXT NOT NULL,
    size       INTEGER NOT NULL CHECK (size >= 0),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (owner, sha256)
) STRICT;

CREATE TABLE file_chunks (
    owner  TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    seq    INTEGER NOT NULL CHECK (seq >= 0),
    data   BLOB NOT NULL,
    PRIMARY KEY (owner, sha256, seq),
    FOREIGN KEY (owner, sha256) REFERENCES file_blobs (owner, sha256)
) STRICT;

CREATE TABLE files (
    id         TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    name       TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size       INTEGER NOT NULL CHECK (size >= 0),
    sha256     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    deleted_at INTEGER,
    FOREIGN KEY (owner, sha256) REFERENCES file_blobs (owner, sha256)
) STRICT;

-- An owner's files, newest first (ListFiles), and their total size (the
-- max_file_bytes quota): those not deleted.
CREATE INDEX files_owner_created ON files (owner, created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- +goose Down
DROP INDEX files_owner_created;
DROP TABLE files;
DROP TABLE file_chunks;
DROP TABLE file_blobs;
