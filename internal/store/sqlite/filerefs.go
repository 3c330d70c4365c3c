package sqlite

import (
	"context"
	"fmt"

	"github.com/parleyhq/parley/internal/chat"
	"github.com/parleyhq/parley/internal/store/internal/dbutil"
)

// useFiles records that the chat uses the uploaded files parts name
// (file_refs), so their bytes stay while the chat exists. An id that
// names no file is left out.
func (t *tx) useFiles(ctx context.Context, chatID string, parts []chat.Part) error {
	for _, id := range dbutil.FileIDs(parts) {
		if _, err := t.q.ExecContext(ctx, `INSERT INTO file_refs (file_id, chat_id)
			SELECT id, ? FROM files WHERE id = ? ON CONFLICT DO NOTHING`, chatID, id); err != nil {
			return fmt.Errorf("record the use of file %s: %w", id, classify(err))
		}
	}
	return nil
}

// purgeFiles deletes the owner's deleted files that no chat uses, then the
// blobs (and their chunks) that no file of the owner names any more: what
// DeleteFile and DeleteChat leave unused.
func purgeFiles(ctx context.Context, q querier, owner string) error {
	for _, stmt := range []string{
		`DELETE FROM files WHERE owner = ?1 AND deleted_at IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM file_refs r WHERE r.file_id = files.id)`,
		`DELETE FROM file_chunks WHERE owner = ?1 AND sha256 IN (
			SELECT b.sha256 FROM file_blobs b WHERE b.owner = ?1
			AND NOT EXISTS (SELECT 1 FROM files f WHERE f.owner = b.owner AND f.sha256 = b.sha256))`,
		`DELETE FROM file_blobs WHERE owner = ?1
			AND NOT EXISTS (SELECT 1 FROM files f WHERE f.owner = file_blobs.owner AND f.sha256 = file_blobs.sha256)`,
	} {
		if _, err := q.ExecContext(ctx, stmt, owner); err != nil {
			return fmt.Errorf("purge the unused files of %s: %w", owner, classify(err))
		}
	}
	return nil
}
